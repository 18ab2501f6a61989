import Foundation
import RelaisHTTPClient
import RelaisJOSE
import RelaisServer
import RelaisTestSupport
import Testing

extension DevProviderProcessTests {
    /// Fault injection through the test API and the configuration, key rotation, and state kept in Redis.
    @Suite struct DevProviderFaultTests {
        @discardableResult
        static func arm(_ client: ProviderClient, _ fault: String, for clientID: String? = nil, once: Bool = true) async throws -> HTTPClientResponse {
            var body: [String: JSONValue] = ["fault": .string(fault), "once": .bool(once)]
            if let clientID { body["client_id"] = .string(clientID) }
            return try await client.http.send(
                HTTPClientRequest(
                    method: .post, url: client.provider.baseURL + "/_test/faults", headers: [(name: "Content-Type", value: "application/json")],
                    body: JSONValue.object(body).serialized())
            )
        }

        private func idToken(_ client: ProviderClient, after fault: String) async throws -> String {
            #expect(try await Self.arm(client, fault).status == 201)
            return try #require(try await client.tokens()["id_token"]?.stringValue)
        }

        @Test func idTokenFaultsBreakExactlyOneCheck() async throws {
            let client = try await ProviderClient.launch()
            func rejection(_ fault: String) async throws -> JOSEError? {
                let token = try await idToken(client, after: fault)
                do {
                    _ = try await client.verify(token)
                    return nil
                } catch let error as JOSEError {
                    return error
                }
            }
            #expect(try await rejection("id_token:wrong_nonce")?.code == "jwt_nonce")
            #expect(try await rejection("id_token:wrong_iss")?.code == "jwt_iss")
            #expect(try await rejection("id_token:wrong_aud")?.code == "jwt_aud")
            #expect(try await rejection("id_token:expired")?.code == "jwt_exp")
            #expect(try await rejection("id_token:bad_signature") == .invalidSignature)
            #expect(try await rejection("id_token:alg_none") == .unsupportedAlgorithm("none"))
            let unnamed = try JWS.parse(try await idToken(client, after: "id_token:missing_kid"))
            #expect(unnamed.keyID == nil)
            // One-shot faults are spent: the next token is clean.
            _ = try await client.verify(try #require(try await client.tokens()["id_token"]?.stringValue))
        }

        /// An at_hash that is another access token's: the signature and every other check pass.
        @Test func wrongAccessTokenHash() async throws {
            let client = try await ProviderClient.launch()
            #expect(try await Self.arm(client, "id_token:wrong_at_hash").status == 201)
            let tokens = try await client.tokens()
            let idToken = try #require(tokens["id_token"]?.stringValue)
            let accessToken = try #require(tokens["access_token"]?.stringValue)
            _ = try await client.verify(idToken)
            await #expect(throws: JOSEError.claimRejected(check: .accessTokenHash, reason: "at_hash does not match the access token")) {
                try await client.verify(idToken, accessToken: accessToken)
            }
            // One-shot: the next id_token's at_hash is its access token's.
            let clean = try await client.tokens()
            _ = try await client.verify(try #require(clean["id_token"]?.stringValue), accessToken: try #require(clean["access_token"]?.stringValue))
        }

        @Test func userinfoFaults() async throws {
            let client = try await ProviderClient.launch()
            let tokens = try await client.tokens()
            let subject = try await client.verify(try #require(tokens["id_token"]?.stringValue)).subject
            let accessToken = try #require(tokens["access_token"]?.stringValue)
            try await Self.arm(client, "userinfo:sub_mismatch")
            let mismatched = try await client.verify(try await client.userinfo(accessToken).bodyText, nonce: nil)
            #expect(mismatched.subject != nil && mismatched.subject != subject)
            try await Self.arm(client, "userinfo:truncated")
            await #expect(throws: HTTPClientError.incompleteResponse(host: "127.0.0.1:\(client.provider.port)")) {
                try await client.userinfo(accessToken)
            }
            try await Self.arm(client, "userinfo:status=503")
            let unavailable = try await client.userinfo(accessToken)
            #expect(unavailable.status == 503)
            #expect(JSONValue.object(from: unavailable.body)?["error"] == .string("server_error"))
            #expect(try await client.verify(try await client.userinfo(accessToken).bodyText, nonce: nil).subject == subject)
        }

        @Test func transportFaultsOnTheTokenEndpoint() async throws {
            let client = try await ProviderClient.launch()
            let code = try #require(try await client.signIn()["code"])
            try await Self.arm(client, "token:status=503")
            let unavailable = try await client.exchange(code: code)
            #expect(unavailable.status == 503)
            // The provider failed before consuming the code: a retry succeeds.
            #expect(try await client.exchange(code: code).status == 200)

            try await Self.arm(client, "token:malformed")
            let malformed = try await client.exchange(code: try #require(try await client.signIn()["code"]))
            #expect(malformed.status == 200)
            #expect(JSONValue.object(from: malformed.body) == nil)

            try await Self.arm(client, "token:delay=700")
            let slowCode = try #require(try await client.signIn()["code"])
            let start = ContinuousClock.now
            #expect(try await client.exchange(code: slowCode).status == 200)
            #expect(ContinuousClock.now - start >= .milliseconds(700))
        }

        @Test func discoveryAndJWKSFaults() async throws {
            let client = try await ProviderClient.launch()
            let discovery = client.issuer + "/.well-known/openid-configuration"
            try await Self.arm(client, "discovery:malformed")
            #expect(JSONValue.object(from: try await client.get(discovery).body) == nil)
            try await Self.arm(client, "jwks:status=500")
            #expect(try await client.get(client.issuer + "/jwks").status == 500)
            try await Self.arm(client, "jwks:truncated")
            await #expect(throws: HTTPClientError.self) { try await client.get(client.issuer + "/jwks") }
            #expect(JSONValue.object(from: try await client.get(discovery).body) != nil)
            try await Self.arm(client, "authorize:status=503")
            let page = try await client.authorize(client.authorizeParameters())
            #expect(page.status == 503 && page.header("content-type")?.hasPrefix("text/html") == true)
        }

        @Test func faultsCanTargetOneClientAndLastUntilCleared() async throws {
            let client = try await ProviderClient.launch()
            #expect(try await Self.arm(client, "token:status=500", for: "other", once: false).status == 201)
            #expect(try await client.exchange(code: try #require(try await client.signIn()["code"])).status == 200)
            for _ in 0..<2 {
                let code = try #require(try await client.signIn(client: "other")["code"])
                #expect(try await client.exchange(code: code, client: "other").status == 500)
            }
            let listed = try #require(JSONValue.object(from: try await client.get(client.provider.baseURL + "/_test/faults").body))
            #expect(listed["faults"]?.arrayValue?.first?.objectValue?["fault"] == .string("token:status=500"))
            let cleared = try await client.http.send(HTTPClientRequest(method: .delete, url: client.provider.baseURL + "/_test/faults"))
            #expect(cleared.status == 204)
            let code = try #require(try await client.signIn(client: "other")["code"])
            #expect(try await client.exchange(code: code, client: "other").status == 200)
        }

        @Test func badFaultRequestsAreRefusedWithAReason() async throws {
            let client = try await ProviderClient.launch()
            func refusal(_ fault: String, for clientID: String? = nil) async throws -> String? {
                let response = try await Self.arm(client, fault, for: clientID)
                #expect(response.status == 400)
                return JSONValue.object(from: response.body)?["error_description"]?.stringValue
            }
            #expect(try await refusal("token:explode")?.contains("unknown fault kind 'explode'") == true)
            #expect(try await refusal("nowhere:delay=5")?.contains("expected target:kind") == true)
            #expect(try await refusal("token:delay")?.contains("delay needs a value") == true)
            #expect(try await refusal("token:status=200")?.contains("HTTP error status") == true)
            #expect(try await refusal("token:sub_mismatch")?.contains("applies to userinfo") == true)
            #expect(try await refusal("token:status=500", for: "nobody")?.contains("unknown client_id") == true)
            let notJSON = try await client.http.send(HTTPClientRequest(method: .post, url: client.provider.baseURL + "/_test/faults", body: Array("token:status=500".utf8)))
            #expect(notJSON.status == 400)
        }

        @Test func configuredFaultsApplyToEveryRequestOfTheirClient() async throws {
            let clients = ProviderClient.clients.replacingOccurrences(
                of: "    sector_identifier: other-sector", with: "    sector_identifier: other-sector\n    faults: \"userinfo:status=503\""
            )
            let client = try await ProviderClient.launch(clients: clients)
            let tokens = try await client.tokens(client: "other")
            for _ in 0..<2 { #expect(try await client.userinfo(try #require(tokens["access_token"]?.stringValue)).status == 503) }
            #expect(try await client.userinfo(try #require(try await client.tokens(client: "app")["access_token"]?.stringValue)).status == 200)
        }

        @Test func theTestAPICanBeTurnedOff() async throws {
            let client = try await ProviderClient.launch(provider: "  test_api: false")
            #expect(try await Self.arm(client, "token:status=500").status == 404)
            #expect(try await client.http.send(HTTPClientRequest(method: .post, url: client.provider.baseURL + "/_test/rotate-keys")).status == 404)
        }

        @Test func aKeyRotationPublishesAndSignsWithANewKid() async throws {
            let client = try await ProviderClient.launch()
            let before = try await client.jwks().keys.compactMap(\.keyID)
            let rotated = try await client.http.send(HTTPClientRequest(method: .post, url: client.provider.baseURL + "/_test/rotate-keys"))
            let kidValues = JSONValue.object(from: rotated.body)?["kids"]?.arrayValue ?? []
            let kids = kidValues.compactMap { $0.stringValue }
            #expect(kids.count == 2 && Set(kids).isDisjoint(with: before))
            let after = try await client.jwks().keys.compactMap(\.keyID)
            #expect(after == kids + before)  // the previous generation stays published
            let token = try #require(try await client.tokens()["id_token"]?.stringValue)
            #expect(try JWS.parse(token).keyID == kids[0])
            _ = try await client.verify(token)
            // A second rotation drops the oldest generation.
            _ = try await client.http.send(HTTPClientRequest(method: .post, url: client.provider.baseURL + "/_test/rotate-keys"))
            #expect(Set(try await client.jwks().keys.compactMap(\.keyID)).isDisjoint(with: before))
        }

        @Test func aConfiguredSigningKeySignsAndCannotBeRotated() async throws {
            let key = try JWK.generate(for: .es256)
            let path = FileManager.default.temporaryDirectory.appendingPathComponent("relais-dp-key-\(UUID().uuidString).pem").path
            try #require(key.privateKeyPEM()).write(toFile: path, atomically: true, encoding: .utf8)
            let client = try await ProviderClient.launch(provider: "  signing_key_file: \(path)")
            let token = try JWS.parse(try #require(try await client.tokens()["id_token"]?.stringValue))
            #expect(token.keyID == key.thumbprint())
            try token.verify(with: try JWK(object: try #require(key.publicJSON())))
            let rotate = try await client.http.send(HTTPClientRequest(method: .post, url: client.provider.baseURL + "/_test/rotate-keys"))
            #expect(rotate.status == 409)
            #expect(JSONValue.object(from: rotate.body)?["error"] == .string("dev_provider_keys_pinned"))
        }

        @Test func onRedisTheProviderSurvivesItsOwnRestart() async throws {
            let redis = try await RedisServerProcess.launch()
            defer { redis.stop() }
            let client = try await ProviderClient.launch(store: "  kind: redis\n  redis:\n    url: \(redis.url)\n    key_prefix: \"dev-provider-test:\"")
            let kids = try await client.jwks().keys.compactMap(\.keyID)
            let code = try #require(try await client.signIn(as: "pierre")["code"])
            try await DevProviderFaultTests.arm(client, "userinfo:status=503")
            try await client.provider.restart()

            #expect(try await client.jwks().keys.compactMap(\.keyID) == kids)
            let response = try await client.exchange(code: code)
            #expect(response.status == 200)
            let tokens = try #require(JSONValue.object(from: response.body))
            _ = try await client.verify(try #require(tokens["id_token"]?.stringValue))
            let accessToken = try #require(tokens["access_token"]?.stringValue)
            #expect(try await client.userinfo(accessToken).status == 503)  // the armed fault survived too
            #expect(try await client.userinfo(accessToken).status == 200)
            let again = try await client.openLoginPage(client.authorizeParameters())
            #expect(again.page.contains(#"id="continue""#))  // the browser session survived
        }
    }
}
