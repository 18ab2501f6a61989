import Foundation
import RelaisClock
import RelaisCrypto
import RelaisHTTPClient
import RelaisJOSE
import RelaisServer
import RelaisTestSupport
import Testing

extension RelaySignInAndTokensChain {
    /// `/token` (code and refresh grants) and `/userinfo`: every refusal, rotation, grace and reuse.
    @Suite struct RelayTokenTests {
        private func error(_ response: HTTPClientResponse) -> String? { JSONValue.object(from: response.body)?["error"]?.stringValue }

        @Test func codeExchangeRefusals() async throws {
            let harness = try await RelayHarness.launch()
            let request = RelayHarness.AppRequest()
            let code = try #require(try await harness.signIn(request)["code"])
            let token = harness.issuer + "/token"
            func exchange(_ fields: [(String, String)]) async throws -> HTTPClientResponse { try await harness.post(token, fields) }
            let base = [("grant_type", "authorization_code"), ("client_id", "app"), ("redirect_uri", request.redirectURI)]

            let notForm = try await harness.http.send(
                HTTPClientRequest(method: .post, url: token, headers: [(name: "Content-Type", value: "application/json")], body: Array("{}".utf8)))
            #expect(notForm.status == 400 && error(notForm) == "invalid_request")
            #expect(error(try await exchange(base + [("code", code)])) == "invalid_request")  // no code_verifier
            let unknownClient = try await exchange([("grant_type", "authorization_code"), ("client_id", "nobody"), ("code", code), ("code_verifier", request.verifier)])
            #expect(unknownClient.status == 401 && error(unknownClient) == "invalid_client")
            #expect(error(try await exchange(base + [("code", code), ("code_verifier", request.verifier), ("code", code)])) == "invalid_request")
            #expect(error(try await harness.post(token, [("grant_type", "password"), ("client_id", "app")])) == "unsupported_grant_type")
            // A wrong verifier consumes the code: PKCE failures are not retried.
            let wrongVerifier = try await exchange(base + [("code", code), ("code_verifier", SecureRandom.token(bits: 256))])
            #expect(wrongVerifier.status == 400 && error(wrongVerifier) == "invalid_grant")
            #expect(error(try await harness.exchange(code, request)) == "invalid_grant")

            let second = RelayHarness.AppRequest()
            let secondCode = try #require(try await harness.signIn(second)["code"])
            var wrongRedirect = second
            wrongRedirect.redirectURI = "http://127.0.0.1:9999/cb"
            #expect(error(try await harness.exchange(secondCode, wrongRedirect)) == "invalid_grant")
            #expect(error(try await harness.exchange("made-up-code", second)) == "invalid_grant")
        }

        @Test func aReplayedCodeRevokesTheSessionItOpened() async throws {
            let harness = try await RelayHarness.launch()
            let request = RelayHarness.AppRequest()
            let code = try #require(try await harness.signIn(request)["code"])
            let first = try #require(JSONValue.object(from: try await harness.exchange(code, request).body))
            let accessToken = try #require(first["access_token"]?.stringValue)
            #expect(try await harness.userinfo(accessToken).status == 200)
            let replay = try await harness.exchange(code, request)
            #expect(error(replay) == "invalid_grant")
            #expect(JSONValue.object(from: replay.body)?["error_description"]?.stringValue?.contains("revoked") == true)
            #expect(try await harness.userinfo(accessToken).status == 401)
            #expect(error(try await harness.refresh(try #require(first["refresh_token"]?.stringValue))) == "invalid_grant")
        }

        @Test func refreshRotatesAndAReplayWithinTheGraceWindowGetsTheLiveToken() async throws {
            let harness = try await RelayHarness.launch()
            let tokens = try await harness.tokens()
            let original = try #require(tokens["refresh_token"]?.stringValue)
            let first = try await harness.refresh(original)
            #expect(first.status == 200)
            let rotated = try #require(JSONValue.object(from: first.body))
            let next = try #require(rotated["refresh_token"]?.stringValue)
            #expect(next != original)
            #expect(rotated["access_token"] != tokens["access_token"])
            // The app lost the response and retries with the old token: the same new refresh
            // token, with a working access token.
            let retry = try #require(JSONValue.object(from: try await harness.refresh(original).body))
            #expect(retry["refresh_token"] == rotated["refresh_token"] && retry["scope"] == rotated["scope"])
            #expect(try await harness.userinfo(try #require(retry["access_token"]?.stringValue)).status == 200)
            // The new token rotates normally.
            let third = try await harness.refresh(next)
            #expect(third.status == 200)
            #expect(try await harness.userinfo(try #require(JSONValue.object(from: third.body)?["access_token"]?.stringValue)).status == 200)
        }

        @Test func aRefreshTokenReusedAfterTheGraceWindowEndsTheSession() async throws {
            let harness = try await RelayHarness.launch(relayExtra: "relay:\n  refresh_grace: 1s")
            let tokens = try await harness.tokens()
            let original = try #require(tokens["refresh_token"]?.stringValue)
            let rotated = try #require(JSONValue.object(from: try await harness.refresh(original).body))
            harness.clock.advance(by: .milliseconds(2100))
            let reuse = try await harness.refresh(original)
            #expect(error(reuse) == "invalid_grant")
            #expect(JSONValue.object(from: reuse.body)?["error_description"]?.stringValue?.contains("revoked") == true)
            #expect(error(try await harness.refresh(try #require(rotated["refresh_token"]?.stringValue))) == "invalid_grant")
            #expect(try await harness.userinfo(try #require(rotated["access_token"]?.stringValue)).status == 401)
        }

        @Test func concurrentRefreshesOfOneTokenRotateOnce() async throws {
            let harness = try await RelayHarness.launch()
            let original = try #require(try await harness.tokens()["refresh_token"]?.stringValue)
            let responses = try await withThrowingTaskGroup(of: HTTPClientResponse.self) { group in
                for _ in 0..<6 { group.addTask { try await harness.refresh(original) } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(responses.allSatisfy { $0.status == 200 })
            let refreshTokens = Set(responses.compactMap { JSONValue.object(from: $0.body)?["refresh_token"]?.stringValue })
            #expect(refreshTokens.count == 1)
        }

        @Test func refreshRefusals() async throws {
            let harness = try await RelayHarness.launch()
            let token = try #require(try await harness.tokens()["refresh_token"]?.stringValue)
            #expect(error(try await harness.refresh("unknown-token")) == "invalid_grant")
            #expect(error(try await harness.post(harness.issuer + "/token", [("grant_type", "refresh_token"), ("client_id", "app")])) == "invalid_request")
            let wider = try await harness.post(
                harness.issuer + "/token", [("grant_type", "refresh_token"), ("refresh_token", token), ("client_id", "app"), ("scope", "openid phone")])
            #expect(error(wider) == "invalid_scope")
            // The refusals above did not consume it; a narrower scope is allowed (RFC 6749 §6).
            let narrower = try await harness.post(
                harness.issuer + "/token", [("grant_type", "refresh_token"), ("refresh_token", token), ("client_id", "app"), ("scope", "openid email")])
            #expect(narrower.status == 200)
            let narrowed = try #require(JSONValue.object(from: narrower.body))
            #expect(narrowed["scope"] == .string("openid email"))
            let narrowedAccess = try #require(narrowed["access_token"]?.stringValue)
            let claims = try #require(JSONValue.object(from: try await harness.userinfo(narrowedAccess).body))
            #expect(Set(claims.keys) == ["sub", "email"])
            // The session keeps its scopes: the next refresh without scope gets them all.
            let full = try await harness.refresh(try #require(narrowed["refresh_token"]?.stringValue))
            #expect(JSONValue.object(from: full.body)?["scope"] == .string("openid profile birth email"))
        }

        @Test func userinfoRefusalsFollowRFC6750() async throws {
            let harness = try await RelayHarness.launch()
            let missing = try await harness.get(harness.issuer + "/userinfo")
            #expect(missing.status == 401)
            #expect(missing.header("www-authenticate") == #"Bearer realm="relais""#)
            let garbage = try await harness.userinfo("not.a.token")
            #expect(garbage.status == 401)
            #expect(garbage.header("www-authenticate")?.contains(#"error="invalid_token""#) == true)
            let basic = try await harness.http.send(HTTPClientRequest(url: harness.issuer + "/userinfo", headers: [(name: "Authorization", value: "Basic YTpi")]))
            #expect(basic.status == 400)
            // A token signed by someone else.
            let stranger = try JWK.generate(for: .es256, keyID: try await harness.relayKeys().keys[0].keyID)
            let now = Date().timeIntervalSince1970
            let forged = try JWS.sign(
                payload: JSONValue.object([
                    "iss": .string(harness.issuer), "sub": .string("x"), "client_id": .string("app"), "sid": .string("s"), "scope": .string("openid"),
                    "exp": .number(now + 60), "iat": .number(now),
                ]).serialized(), with: stranger, algorithm: .es256, extraHeader: ["typ": .string("at+jwt")]
            )
            #expect(try await harness.userinfo(forged).status == 401)
            // The id_token is not an access token (typ).
            let idToken = try #require(try await harness.tokens()["id_token"]?.stringValue)
            #expect(try await harness.userinfo(idToken).status == 401)
        }
    }
}
