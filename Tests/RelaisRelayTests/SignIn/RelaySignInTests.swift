import Foundation
import RelaisClock
import RelaisCrypto
import RelaisHTTPClient
import RelaisJOSE
import RelaisServer
import RelaisTestSupport
import Testing

extension RelaySignInAndTokensChain {
    /// The relay's sign-in against the development provider (FranceConnect v2), over real HTTP.
    @Suite struct RelaySignInTests {
        @Test func aSignInGivesTheAppVerifiableTokensAndItsIdentity() async throws {
            let harness = try await RelayHarness.launch()
            var request = RelayHarness.AppRequest()
            request.redirectURI = "http://127.0.0.1:53412/cb"  // a loopback redirect with the app's own port (RFC 8252 §7.3)
            let toRelay = try await harness.throughProvider(request)
            let callbackResponse = try await harness.callback(toRelay)
            // The provider's share of the callback's time, for operators and the benchmark.
            let timing = try #require(callbackResponse.header("server-timing"))
            #expect(timing.hasPrefix("provider;dur=") && Double(timing.dropFirst("provider;dur=".count)) ?? -1 > 0)
            let callback = try RelayHarness.query(try #require(callbackResponse.header("location")))
            #expect(callback["state"] == request.state)
            #expect(callback["iss"] == harness.issuer)
            // The code carries the sign-in sealed: nothing of the person or the app's request reads
            // in it, decoded or not, and it stays well within what browsers, app links and proxies
            // carry in a URL.
            let code = try #require(callback["code"])
            let decoded = code.split(separator: ".").compactMap { Base64URL.decode(String($0)) }.map { String(decoding: $0, as: UTF8.self) }.joined()
            for readable in ["DUBOIS", "Angela", "75107", request.state, request.nonce] {
                #expect(!code.contains(readable) && !decoded.contains(readable), "\(readable) reads in the code")
            }
            #expect(decoded.contains("A256GCM") && code.utf8.count <= 4096, "\(code.utf8.count) bytes")
            let response = try await harness.exchange(code, request)
            #expect(response.status == 200)
            #expect(response.header("cache-control") == "no-store")
            let tokens = try #require(JSONValue.object(from: response.body))
            #expect(tokens["token_type"] == .string("Bearer"))
            #expect(tokens["expires_in"] == .number(300))
            #expect(tokens["scope"] == .string("openid profile birth email"))
            #expect(tokens["refresh_token"]?.stringValue?.isEmpty == false)

            let keys = try await harness.relayKeys()
            let access = try JWS.parse(try #require(tokens["access_token"]?.stringValue))
            try access.verify(with: keys)
            var accessPolicy = ClaimsPolicy(issuer: harness.issuer, audience: "app", now: { harness.clock.now })
            accessPolicy.expectedType = "at+jwt"
            accessPolicy.checkAuthorizedParty = false  // RFC 9068: the client is in client_id
            let accessClaims = try accessPolicy.validate(access)
            // For the app's APIs and, since it carries openid, for Relais' own /userinfo.
            #expect(accessClaims.audience == ["app", harness.issuer])
            #expect(accessClaims.string("client_id") == "app" && accessClaims.acr == "eidas1" && accessClaims.string("sid") != nil)
            #expect(accessClaims["given_name"] == nil)  // identity claims stay out of access tokens

            let id = try JWS.parse(try #require(tokens["id_token"]?.stringValue))
            try id.verify(with: keys)
            var idPolicy = ClaimsPolicy(issuer: harness.issuer, audience: "app", now: { harness.clock.now })
            idPolicy.nonce = request.nonce
            let idClaims = try idPolicy.validate(id)
            #expect(idClaims.subject == accessClaims.subject)
            #expect(idClaims.string("family_name") == "DUBOIS" && idClaims.string("birthplace") == "75107" && idClaims.string("email") != nil)
            #expect(idClaims["at_hash"] == .string(Base64URL.encode(SHA256.hash(Array(tokens["access_token"]!.stringValue!.utf8)).prefix(16))))

            let userinfo = try await harness.userinfo(try #require(tokens["access_token"]?.stringValue))
            #expect(userinfo.status == 200)
            let claims = try #require(JSONValue.object(from: userinfo.body))
            #expect(claims["sub"] == .string(try #require(idClaims.subject)))
            #expect(claims["given_name"] == .string("Angela Claire Louise"))
            #expect(claims["birthcountry"] == .string("99100"))
        }

        /// During a rolling upgrade from a version before sealed codes (`relay.code_format: stored`),
        /// the code names a stored record that the older instances read too; it opens its session
        /// once, and its replay ends that session.
        @Test func aStoredFormatCodeOpensItsSessionOnce() async throws {
            let harness = try await RelayHarness.launch(relayExtra: "relay:\n  code_format: stored")
            let request = RelayHarness.AppRequest()
            let code = try #require(try await harness.signIn(request)["code"])
            #expect(code.utf8.count < 80 && code.split(separator: ".").count == 2, "\(code)")
            let first = try await harness.exchange(code, request)
            #expect(first.status == 200, "\(first.bodyText)")
            let replay = try await harness.exchange(code, request)
            #expect(replay.status == 400 && replay.bodyText.contains("the code was already used; the session it opened is revoked"), "\(replay.bodyText)")
            let access = try #require(JSONValue.object(from: first.body)?["access_token"]?.stringValue)
            #expect(try await harness.userinfo(access).status == 401)
        }

        /// A stored-format code the store will not take (here a Redis ACL that lets Relais write
        /// transactions but not codes) sends the app back with `temporarily_unavailable`: no code
        /// that names nothing, and the app may start the sign-in again.
        @Test func aStoredFormatCodeTheStoreRefusesSendsTheAppBackUnavailable() async throws {
            let redis = try await RedisServerProcess.launch(extraArguments: [
                "--user", "default", "on", "nopass", "~*", "&*", "+@all", "--user", "relais", "on", ">relais-test-pass", "%R~*", "~relais:tx:*", "~relais:relay:*", "~relais:rl:*",
                "&*", "+@all",
            ])
            defer { redis.stop() }
            let harness = try await RelayHarness.launch(
                store: "  kind: redis\n  redis:\n    url: redis://relais:relais-test-pass@127.0.0.1:\(redis.port)", relayExtra: "relay:\n  code_format: stored"
            )
            let request = RelayHarness.AppRequest()
            let response = try await harness.callback(try await harness.throughProvider(request))
            let denied = await redis.cli(["ACL", "LOG"]) ?? ""
            let back = try RelayHarness.query(try #require(response.header("location"), "\(denied)"))
            #expect(back["error"] == "temporarily_unavailable" && back["code"] == nil && back["state"] == request.state, "\(response.header("location") ?? "")")
            #expect(back["error_description"] == "Relais cannot store the sign-in right now; try again shortly")
            // Refused at the code, and nowhere before it (Redis' log of what the ACL denied).
            #expect(denied.contains("relais:code:{") && !denied.contains("relais:tx:"), "\(denied)")
        }

        @Test func scopesLimitTheReleasedClaims() async throws {
            let harness = try await RelayHarness.launch()
            var request = RelayHarness.AppRequest()
            request.scope = "openid email"
            let tokens = try await harness.tokens(request)
            let accessToken = try #require(tokens["access_token"]?.stringValue)
            let claims = try #require(JSONValue.object(from: try await harness.userinfo(accessToken).body))
            #expect(Set(claims.keys) == ["sub", "email"])
        }

        @Test func discoveryAndKeysDescribeRelaisForStandardClients() async throws {
            let harness = try await RelayHarness.launch()
            for path in ["/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"] {
                let document = try #require(JSONValue.object(from: try await harness.get(harness.issuer + path).body))
                #expect(document["issuer"] == .string(harness.issuer))
                #expect(document["code_challenge_methods_supported"] == .array([.string("S256")]))
                #expect(document["token_endpoint_auth_methods_supported"] == .array([.string("none")]))
                #expect(document["jwks_uri"] == .string(harness.issuer + "/jwks.json"))
            }
            let keys = try await harness.relayKeys()
            // The EC key of access tokens and the RSA key of RS256 id_tokens (OpenID Connect Discovery §3).
            #expect(keys.keys.compactMap(\.algorithm).sorted() == ["ES256", "RS256"] && keys.keys.allSatisfy { !$0.isPrivate })
        }

        @Test func unknownAppsAndRedirectsGetAPageNeverARedirect() async throws {
            let harness = try await RelayHarness.launch()
            func page(_ change: (inout RelayHarness.AppRequest) -> Void, clientID: String = "app") async throws -> (Int, String?) {
                var request = RelayHarness.AppRequest()
                change(&request)
                let parameters = request.parameters.map { $0.0 == "client_id" ? ($0.0, clientID) : $0 }
                let response = try await harness.get(FormParameters.url(harness.issuer + "/authorize", adding: parameters))
                #expect(response.header("location") == nil)
                return (response.status, response.bodyText.firstMatch(of: /id="error-code">([^<]+)</).map { String($0.1) })
            }
            #expect(try await page({ _ in }, clientID: "intruder") == (400, "unknown_client"))
            #expect(try await page { $0.redirectURI = "https://evil.example/cb" } == (400, "invalid_redirect_uri"))
            #expect(try await page { $0.redirectURI = "http://127.0.0.1:80/other" } == (400, "invalid_redirect_uri"))
            #expect(try await page { $0.redirectURI = "http://localhost:7777/cb" } == (400, "invalid_redirect_uri"))
            #expect(try await page { $0.redirectURI = "com.example.app:/oauth2redirect/extra" } == (400, "invalid_redirect_uri"))
        }

        @Test func otherAuthorizeErrorsGoBackToTheApp() async throws {
            let harness = try await RelayHarness.launch()
            func error(_ change: (inout [(String, String)]) -> Void) async throws -> String? {
                var parameters = RelayHarness.AppRequest().parameters
                change(&parameters)
                let response = try await harness.get(FormParameters.url(harness.issuer + "/authorize", adding: parameters))
                #expect(response.status == 302)
                let query = try RelayHarness.query(try #require(response.header("location")))
                #expect(query["iss"] == harness.issuer)
                #expect(query["state"] == parameters.first { $0.0 == "state" }?.1)
                return query["error"]
            }
            func drop(_ name: String) -> (inout [(String, String)]) -> Void { { $0.removeAll { $0.0 == name } } }
            func set(_ name: String, _ value: String) -> (inout [(String, String)]) -> Void {
                { parameters in
                    parameters.removeAll { $0.0 == name }
                    parameters.append((name, value))
                }
            }
            #expect(try await error(drop("code_challenge")) == "invalid_request")
            #expect(try await error(set("code_challenge_method", "plain")) == "invalid_request")
            #expect(try await error(set("code_challenge", "too-short")) == "invalid_request")
            #expect(try await error(set("response_type", "token")) == "unsupported_response_type")
            #expect(try await error(set("scope", "openid phone")) == "invalid_scope")
            #expect(try await error(set("scope", "profile")) == "invalid_scope")
            #expect(try await error(set("provider", "google")) == "invalid_request")
            #expect(try await error(set("acr_values", "eidas9")) == "invalid_request")
            #expect(try await error(set("prompt", "none")) == "login_required")
            #expect(try await error { $0.append(("scope", "openid")) } == "invalid_request")
        }

        @Test func theProviderGetsFranceConnectsParametersOnly() async throws {
            let harness = try await RelayHarness.launch()
            var request = RelayHarness.AppRequest()
            request.extra = [("acr_values", "eidas1"), ("prompt", "login")]
            let response = try await harness.get(FormParameters.url(harness.issuer + "/authorize", adding: request.parameters))
            let query = try RelayHarness.query(try #require(response.header("location")))
            #expect(Set(query.names) == ["response_type", "client_id", "redirect_uri", "scope", "state", "nonce", "acr_values", "prompt"])
            #expect(query["redirect_uri"] == harness.issuer + "/callback")
            #expect(query["state"] != request.state && (query["state"]?.count ?? 0) >= 43)
            #expect(query["nonce"] != request.nonce && (query["nonce"]?.count ?? 0) >= 43)
            #expect(query["prompt"] == "login")
        }

        @Test func cancellingAtTheProviderReachesTheAppAsAccessDenied() async throws {
            let harness = try await RelayHarness.launch()
            let request = RelayHarness.AppRequest()
            let toRelay = try await harness.throughProvider(request, identity: nil)
            let response = try await harness.callback(toRelay)
            let query = try RelayHarness.query(try #require(response.header("location")))
            #expect(query["error"] == "access_denied")
            #expect(query["state"] == request.state)
            // The transaction is spent: a second delivery of the same callback finds nothing.
            let replay = try await harness.callback(toRelay)
            #expect(replay.status == 400 && replay.bodyText.contains("transaction_expired"))
        }

        @Test func aReplayedCallbackIsRefused() async throws {
            let harness = try await RelayHarness.launch()
            let toRelay = try await harness.throughProvider(RelayHarness.AppRequest())
            #expect(try await harness.callback(toRelay).status == 302)
            let replay = try await harness.callback(toRelay)
            #expect(replay.status == 400)
            #expect(replay.bodyText.contains(#"id="error-code">transaction_expired<"#))
            let forged = try await harness.get(harness.issuer + "/callback?code=x&state=made-up")
            #expect(forged.status == 400)
            let stateless = try await harness.get(harness.issuer + "/callback?code=x")
            #expect(stateless.status == 400 && stateless.bodyText.contains("invalid_request"))
        }

        @Test func aCallbackFromAnotherIssuerIsRefused() async throws {
            let harness = try await RelayHarness.launch()
            let toRelay = try await harness.throughProvider(RelayHarness.AppRequest())
            let swapped = toRelay.replacingOccurrences(of: FormEncoding.escape(harness.providerIssuer), with: FormEncoding.escape("https://evil.example"))
            #expect(swapped != toRelay)
            let response = try await harness.callback(swapped)
            let query = try RelayHarness.query(try #require(response.header("location")))
            #expect(query.oauthError?.hasPrefix("server_error: provider_callback_rejected") == true)
        }
    }
}
