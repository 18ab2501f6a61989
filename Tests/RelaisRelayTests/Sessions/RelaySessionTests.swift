import Foundation
import RelaisClock
import RelaisCrypto
import RelaisHTTPClient
import RelaisJOSE
import RelaisServer
import RelaisTestSupport
import Testing

extension RelaySessionsAndProvidersChain {
    /// What APIs and gateways use (introspection, forward-auth) and how sessions end (revoke, logout).
    @Suite struct RelaySessionTests {
        static let resourceServers = """
            resource_servers:
              orders:
                secret: orders-introspection-secret
              billing:
                secret: billing-introspection-secret
                audiences: [billing-api]
            """

        private func introspect(
            _ harness: RelayHarness, _ token: String, as server: String = "orders", secret: String = "orders-introspection-secret", hint: String? = nil
        ) async throws -> HTTPClientResponse {
            var fields = [("token", token)]
            if let hint { fields.append(("token_type_hint", hint)) }
            let credentials = Base64.encode(Array("\(server):\(secret)".utf8))
            return try await harness.post(harness.issuer + "/introspect", fields, headers: [(name: "Authorization", value: "Basic \(credentials)")])
        }

        private func active(_ response: HTTPClientResponse) -> Bool? { JSONValue.object(from: response.body)?["active"].flatMap { if case .bool(let b) = $0 { b } else { nil } } }

        @Test func introspectionReportsLiveTokensAndTurnsInactiveOnRevocation() async throws {
            let harness = try await RelayHarness.launch(relayExtra: Self.resourceServers)
            let tokens = try await harness.tokens()
            let accessToken = try #require(tokens["access_token"]?.stringValue)
            let refreshToken = try #require(tokens["refresh_token"]?.stringValue)
            let response = try await introspect(harness, accessToken)
            #expect(response.status == 200)
            let claims = try #require(JSONValue.object(from: response.body))
            #expect(claims["active"] == .bool(true) && claims["client_id"] == .string("app") && claims["acr"] == .string("eidas1"))
            #expect(claims["scope"] == .string("openid profile birth email") && claims["token_type"] == .string("Bearer"))
            #expect(claims["given_name"] == nil)
            // A refresh token is the app's: a resource server learns nothing of it, hint or not.
            #expect(active(try await introspect(harness, refreshToken, hint: "refresh_token")) == false)
            #expect(active(try await introspect(harness, refreshToken)) == false)
            // An API limited to other audiences sees the token as inactive.
            #expect(active(try await introspect(harness, accessToken, as: "billing", secret: "billing-introspection-secret")) == false)
            #expect(active(try await introspect(harness, "garbage")) == false)
            let wrongSecret = try await introspect(harness, accessToken, secret: "wrong-secret-wrong-secret")
            #expect(wrongSecret.status == 401 && wrongSecret.header("www-authenticate") == #"Basic realm="relais""#)
            #expect(try await harness.post(harness.issuer + "/introspect", [("token", accessToken)]).status == 401)

            let revoke = try await harness.post(harness.issuer + "/revoke", [("token", refreshToken), ("client_id", "app"), ("token_type_hint", "refresh_token")])
            #expect(revoke.status == 200)
            #expect(active(try await introspect(harness, accessToken)) == false)  // before the JWT expires
            #expect(active(try await introspect(harness, refreshToken)) == false)
            #expect(try await harness.refresh(refreshToken).status == 400)
            // Revoking again, or an unknown token, is not an error (RFC 7009 §2.2).
            #expect(try await harness.post(harness.issuer + "/revoke", [("token", refreshToken), ("client_id", "app")]).status == 200)
            #expect(try await harness.post(harness.issuer + "/revoke", [("token", "x"), ("client_id", "nobody")]).status == 401)
        }

        @Test func forwardAuthPassesIdentityHeadersAndRefusesTheRest() async throws {
            let harness = try await RelayHarness.launch(relayExtra: "forward_auth:\n  subject_header: X-User")
            let tokens = try await harness.tokens()
            let accessToken = try #require(tokens["access_token"]?.stringValue)
            func auth(_ query: String = "", token: String? = nil) async throws -> HTTPClientResponse {
                var headers: [(name: String, value: String)] = []
                if let token { headers.append((name: "Authorization", value: "Bearer \(token)")) }
                return try await harness.http.send(HTTPClientRequest(url: harness.issuer + "/auth" + query, headers: headers))
            }
            let ok = try await auth(token: accessToken)
            #expect(ok.status == 200)
            #expect(ok.header("x-user") != nil && ok.header("x-relais-client") == "app" && ok.header("x-relais-acr") == "eidas1")
            #expect(ok.header("x-relais-scope") == "openid profile birth email" && ok.header("x-relais-session") != nil)
            #expect(try await auth("?scope=openid+email", token: accessToken).status == 200)
            let missingScope = try await auth("?scope=orders:write", token: accessToken)
            #expect(missingScope.status == 403 && missingScope.header("www-authenticate")?.contains("insufficient_scope") == true)
            // RFC 9470: the challenge says what the next sign-in needs.
            let weak = try await auth("?acr=eidas2", token: accessToken)
            #expect(weak.status == 401)
            #expect(weak.header("www-authenticate")?.contains(#"error="insufficient_user_authentication""#) == true)
            #expect(weak.header("www-authenticate")?.hasSuffix(#", acr_values="eidas2""#) == true)
            let none = try await auth()
            #expect(none.status == 401 && none.header("www-authenticate") == #"Bearer realm="relais""#)
            #expect(try await auth(token: accessToken + "x").status == 401)

            // Gateways ask with the guarded request's method (nginx, Envoy), and Envoy's path_prefix
            // appends the guarded path and query: every method and /auth/... are answered alike.
            func guarded(_ method: HTTPClientRequest.Method, _ path: String, token: String?) async throws -> HTTPClientResponse {
                try await harness.http.send(
                    HTTPClientRequest(method: method, url: harness.issuer + path, headers: token.map { [(name: "Authorization", value: "Bearer \($0)")] } ?? []))
            }
            for method: HTTPClientRequest.Method in [.post, .put, .delete] {
                let asked = try await guarded(method, "/auth", token: accessToken)
                #expect(asked.status == 200 && asked.header("x-relais-client") == "app", "\(method)")
                #expect(try await guarded(method, "/auth/api/orders/42", token: accessToken).status == 200, "\(method)")
                #expect(try await guarded(method, "/auth/api/orders/42", token: nil).status == 401, "\(method)")
            }
            // Under /auth/... the query is the client's, not the gateway's: it cannot ask for less.
            #expect(try await guarded(.get, "/auth/api/orders?scope=orders:write", token: accessToken).status == 200)

            _ = try await harness.post(harness.issuer + "/revoke", [("token", accessToken), ("client_id", "app")])
            #expect(try await auth(token: accessToken).status == 401)  // session-checked by default
            #expect(try await auth("?session=0", token: accessToken).status == 200)  // JWT only: valid until it expires
            #expect(try await guarded(.post, "/auth/api/orders?session=0", token: accessToken).status == 401)  // a client's session=0 is ignored
        }

        @Test func aCachedVerificationNeverOutlivesTheToken() async throws {
            let harness = try await RelayHarness.launch(relayEnvironment: ["RELAIS_APPS_APP_ACCESS_TOKEN_LIFETIME": "1s"])
            let accessToken = try #require(try await harness.tokens()["access_token"]?.stringValue)
            let claims = try ClaimsPolicy(now: { harness.clock.now }).validate(try JWS.parse(accessToken))
            #expect(claims.expiration! - claims.issuedAt! == 1)
            func auth() async throws -> Int {
                try await harness.http.send(HTTPClientRequest(url: harness.issuer + "/auth?session=0", headers: [(name: "Authorization", value: "Bearer \(accessToken)")])).status
            }
            #expect(try await auth() == 200)
            // exp is iat + 1 s (iat is the clock's second, rounded down), plus Relais' 2 s leeway
            // between instances: valid until 2 s on, refused from 3 s on.
            harness.clock.advance(by: .milliseconds(1900))
            #expect(try await auth() == 200)
            harness.clock.advance(by: .milliseconds(1200))
            #expect(try await auth() == 401)
        }

        @Test func aNewSessionKeyCanBeAddedWhileOldSessionsStayReadable() async throws {
            let redis = try await RedisServerProcess.launch()
            defer { redis.stop() }
            let (k1, k2) = (Base64URL.encode(SecureRandom.bytes(32)), Base64URL.encode(SecureRandom.bytes(32)))
            let harness = try await RelayHarness.launch(
                store: "  kind: redis\n  redis:\n    url: \(redis.url)", relayExtra: "sessions:\n  keys:\n    k1: {secret: \(k1)}"
            )
            let old = try await harness.tokens()
            let config = try String(contentsOfFile: harness.relay.configPath, encoding: .utf8)
            func reconfigure(_ sessions: String) async throws {
                try config.replacingOccurrences(of: "sessions:\n  keys:\n    k1: {secret: \(k1)}", with: sessions)
                    .write(toFile: harness.relay.configPath, atomically: true, encoding: .utf8)
                try await harness.relay.restart()
            }
            try await reconfigure("sessions:\n  active_key: k2\n  keys:\n    k1: {secret: \(k1)}\n    k2: {secret: \(k2)}")
            let refreshed = try await harness.refresh(try #require(old["refresh_token"]?.stringValue))
            #expect(refreshed.status == 200)
            let accessToken = try #require(JSONValue.object(from: refreshed.body)?["access_token"]?.stringValue)
            #expect(try await harness.userinfo(accessToken).status == 200)
            let new = try await harness.tokens()
            // Once k1 is gone, sessions sealed with it can no longer be opened; k2's still can.
            try await reconfigure("sessions:\n  keys:\n    k2: {secret: \(k2)}")
            #expect(try await harness.userinfo(accessToken).status == 401)
            #expect(try await harness.refresh(try #require(new["refresh_token"]?.stringValue)).status == 200)
        }

        @Test func anExpiredSignInTransactionIsRefusedAtTheCallback() async throws {
            let harness = try await RelayHarness.launch(relayExtra: "relay:\n  transaction_lifetime: 1s")
            let toRelay = try await harness.throughProvider(RelayHarness.AppRequest())
            harness.clock.advance(by: .milliseconds(1600))
            let response = try await harness.callback(toRelay)
            #expect(response.status == 400 && response.bodyText.contains(#"id="error-code">transaction_expired<"#))
        }

        @Test func browserLogoutEndsTheRelaisAndTheProviderSessions() async throws {
            let harness = try await RelayHarness.launch()
            let tokens = try await harness.tokens()
            let idToken = try #require(tokens["id_token"]?.stringValue)
            let logout = try await harness.get(
                FormParameters.url(
                    harness.issuer + "/logout",
                    adding: [
                        ("client_id", "app"), ("post_logout_redirect_uri", "com.example.app:/logged-out"), ("state", "bye"), ("id_token_hint", idToken),
                    ]))
            #expect(logout.status == 302)
            let toProvider = try #require(logout.header("location"))
            #expect(toProvider.hasPrefix(harness.providerIssuer + "/session/end?"))
            let providerBack = try await harness.get(toProvider, cookie: harness.providerCookie)
            #expect(providerBack.status == 303)
            let relayCallback = try #require(providerBack.header("location"))
            #expect(relayCallback.hasPrefix(harness.issuer + "/logout/callback?state="))
            let toApp = try await harness.get(relayCallback)
            #expect(toApp.header("location") == "com.example.app:/logged-out?state=bye")
            #expect(try await harness.userinfo(try #require(tokens["access_token"]?.stringValue)).status == 401)
            #expect(try await harness.refresh(try #require(tokens["refresh_token"]?.stringValue)).status == 400)
            // The logout transaction is single use.
            #expect(try await harness.get(relayCallback).status == 400)
        }

        /// docs/client-protocol.md §10: the app signs out (`POST /logout` with its refresh token, as
        /// RelaisKit's signOut does), then opens `GET /logout` to end the provider's session too:
        /// the session is gone, but what the provider's logout needs was kept, once.
        @Test func browserLogoutAfterTheAppsLogoutStillEndsTheProviderSession() async throws {
            let harness = try await RelayHarness.launch()
            let tokens = try await harness.tokens()
            let idToken = try #require(tokens["id_token"]?.stringValue)
            let signOut = try await harness.post(harness.issuer + "/logout", [("client_id", "app"), ("refresh_token", try #require(tokens["refresh_token"]?.stringValue))])
            #expect(signOut.status == 204)
            #expect(try await harness.userinfo(try #require(tokens["access_token"]?.stringValue)).status == 401)
            let url = FormParameters.url(
                harness.issuer + "/logout", adding: [("post_logout_redirect_uri", "com.example.app:/logged-out"), ("state", "bye"), ("id_token_hint", idToken)])
            let logout = try await harness.get(url)
            #expect(logout.status == 302)
            let toProvider = try #require(logout.header("location"))
            #expect(toProvider.hasPrefix(harness.providerIssuer + "/session/end?"), "the provider's session was left alive")
            let providerBack = try await harness.get(toProvider, cookie: harness.providerCookie)
            let relayCallback = try #require(providerBack.header("location"))
            #expect(try await harness.get(relayCallback).header("location") == "com.example.app:/logged-out?state=bye")
            // Once: the same request again has nothing left to end.
            #expect(try await harness.get(url).header("location") == "com.example.app:/logged-out?state=bye")
        }

        /// OpenID Connect RP-Initiated Logout makes client_id optional beside id_token_hint, and
        /// AppAuth sends none: the hint's app is the one logging out. A hint that is not Relais'
        /// names no app.
        @Test func browserLogoutWithoutClientIDTakesTheHintsApp() async throws {
            let harness = try await RelayHarness.launch()
            let tokens = try await harness.tokens()
            let idToken = try #require(tokens["id_token"]?.stringValue)
            let forged = try await harness.get(
                FormParameters.url(
                    harness.issuer + "/logout",
                    adding: [("post_logout_redirect_uri", "com.example.app:/logged-out"), ("id_token_hint", String(idToken.dropLast(4)) + "AAAA")]))
            #expect(forged.status == 400 && forged.header("location") == nil)
            let logout = try await harness.get(
                FormParameters.url(
                    harness.issuer + "/logout", adding: [("post_logout_redirect_uri", "com.example.app:/logged-out"), ("state", "bye"), ("id_token_hint", idToken)]))
            #expect(logout.status == 302)
            #expect(logout.header("location")?.hasPrefix(harness.providerIssuer + "/session/end?") == true)
            #expect(try await harness.refresh(try #require(tokens["refresh_token"]?.stringValue)).status == 400)
        }

        @Test func logoutRefusesUnknownAppsAndTargetsAndToleratesNoHint() async throws {
            let harness = try await RelayHarness.launch()
            func logout(_ parameters: [(String, String)]) async throws -> HTTPClientResponse {
                try await harness.get(FormParameters.url(harness.issuer + "/logout", adding: parameters))
            }
            #expect(try await logout([("client_id", "nobody"), ("post_logout_redirect_uri", "com.example.app:/logged-out")]).status == 400)
            let evil = try await logout([("client_id", "app"), ("post_logout_redirect_uri", "https://evil.example/")])
            #expect(evil.status == 400 && evil.header("location") == nil)
            let noHint = try await logout([("client_id", "app"), ("post_logout_redirect_uri", "com.example.app:/logged-out"), ("state", "s")])
            #expect(noHint.header("location") == "com.example.app:/logged-out?state=s")
        }

        @Test func smallerRefusalsOfTheSessionEndpoints() async throws {
            let harness = try await RelayHarness.launch(relayExtra: Self.resourceServers)
            func oauthError(_ response: HTTPClientResponse) -> String? { JSONValue.object(from: response.body)?["error"]?.stringValue }
            let noState = try await harness.get(harness.issuer + "/logout/callback")
            #expect(noState.status == 400 && noState.bodyText.contains("invalid_request"))
            let unknownState = try await harness.get(harness.issuer + "/logout/callback?state=made-up")
            #expect(unknownState.status == 400 && unknownState.bodyText.contains("transaction_expired"))
            let credentials = Base64.encode(Array("orders:orders-introspection-secret".utf8))
            let noToken = try await harness.post(
                harness.issuer + "/introspect", [("token_type_hint", "access_token")], headers: [(name: "Authorization", value: "Basic \(credentials)")])
            #expect(noToken.status == 400 && oauthError(noToken) == "invalid_request")
            let revokeNoToken = try await harness.post(harness.issuer + "/revoke", [("client_id", "app")])
            #expect(revokeNoToken.status == 400 && oauthError(revokeNoToken) == "invalid_request")
            let apiLogoutNothing = try await harness.post(harness.issuer + "/logout", [("client_id", "app"), ("refresh_token", "")])
            #expect(apiLogoutNothing.status == 400 && oauthError(apiLogoutNothing) == "invalid_grant")
            // Neither a token nor a refresh_token nor anything a browser's logout names: an app's
            // request missing its token (a misspelt field, RFC 6750's access_token), refused in
            // JSON; never a "signed out" page over a session that stays.
            for fields in [[("client_id", "app")], [("client_id", "app"), ("access_token", "x")], [("client_id", "app"), ("refresh_tokn", "x")]] {
                let apiNothing = try await harness.post(harness.issuer + "/logout", fields)
                #expect(apiNothing.status == 400 && oauthError(apiNothing) == "invalid_request", "\(fields)")
            }
            // The same form from a browser's navigation is its logout: nothing named, nothing to end.
            let browserNothing = try await harness.post(harness.issuer + "/logout", [("client_id", "app")], headers: [(name: "Sec-Fetch-Mode", value: "navigate")])
            #expect(browserNothing.status == 200 && browserNothing.bodyText.contains(#"id="logged-out""#))
            let basicAuth = try await harness.http.send(HTTPClientRequest(url: harness.issuer + "/auth", headers: [(name: "Authorization", value: "Basic YTpi")]))
            #expect(basicAuth.status == 400)
        }

        @Test func aSessionUnusedForItsIdleTimeoutEnds() async throws {
            let harness = try await RelayHarness.launch(relayExtra: "sessions:\n  idle_timeout: 2s\n  lifetime: 1h")
            let tokens = try await harness.tokens()
            let first = try await harness.refresh(try #require(tokens["refresh_token"]?.stringValue))
            #expect(first.status == 200)  // a use pushes the idle deadline back
            harness.clock.advance(by: .milliseconds(1500))
            let next = try #require(JSONValue.object(from: first.body)?["refresh_token"]?.stringValue)
            let second = try await harness.refresh(next)
            #expect(second.status == 200)  // used within its idle timeout: still alive
            harness.clock.advance(by: .milliseconds(2100))
            let last = try #require(JSONValue.object(from: second.body)?["refresh_token"]?.stringValue)
            #expect(try await harness.refresh(last).status == 400)
        }

        @Test func apiLogoutWithABearerOrARefreshToken() async throws {
            let harness = try await RelayHarness.launch()
            let first = try await harness.tokens()
            let viaBearer = try await harness.http.send(
                HTTPClientRequest(method: .post, url: harness.issuer + "/logout", headers: [(name: "Authorization", value: "Bearer \(first["access_token"]!.stringValue!)")]))
            #expect(viaBearer.status == 204)
            #expect(try await harness.userinfo(first["access_token"]!.stringValue!).status == 401)
            let second = try await harness.tokens()
            let viaRefresh = try await harness.post(harness.issuer + "/logout", [("client_id", "app"), ("refresh_token", second["refresh_token"]!.stringValue!)])
            #expect(viaRefresh.status == 204)
            #expect(try await harness.refresh(second["refresh_token"]!.stringValue!).status == 400)
            #expect(try await harness.post(harness.issuer + "/logout", [("client_id", "app"), ("refresh_token", "unknown")]).status == 400)
        }

        @Test func anOperatorSignsAUserOutEverywhere() async throws {
            let redis = try await RedisServerProcess.launch()
            defer { redis.stop() }
            let harness = try await RelayHarness.launch(store: "  kind: redis\n  redis:\n    url: \(redis.url)")
            let first = try await harness.tokens(identity: "pierre")
            let second = try await harness.tokens(identity: "pierre")
            let other = try await harness.tokens(identity: "karima")
            let access = try JWS.parse(try #require(first["access_token"]?.stringValue))
            let accessClaims = try ClaimsPolicy(now: { harness.clock.now }).validate(access)
            let subject = try #require(accessClaims.subject)
            func sessions(_ arguments: [String]) async throws -> (status: Int32?, output: String) {
                let output = FileManager.default.temporaryDirectory.appendingPathComponent("relais-sessions-\(UUID().uuidString)").path
                let process = try ChildProcess.spawn(
                    RelaisProcess.binary, ["sessions"] + arguments + ["--config", harness.relay.configPath, "--sub", subject], standardOutput: output)
                let status = await process.exitStatus(within: .seconds(30))
                return (status, (try? String(contentsOfFile: output, encoding: .utf8)) ?? "")
            }
            // Listing shows which apps and since when, never identity claims or tokens.
            let listed = try await sessions(["list"])
            #expect(listed.status == 0)
            let lines = listed.output.split(separator: "\n").map(String.init)
            #expect(lines.count == 3 && lines.last == "2 live session(s)", "\(listed.output)")
            #expect(lines.dropLast().allSatisfy { $0.contains("  client=app  provider=fc  acr=eidas1  since=") && $0.contains("  idle_expires_in=") })
            let sid = try #require(accessClaims.string("sid"))
            #expect(lines.contains { $0.hasPrefix(sid + "  ") })
            #expect(!listed.output.contains("MERCIER") && !listed.output.contains("eyJ"))
            let output = FileManager.default.temporaryDirectory.appendingPathComponent("relais-sessions-\(UUID().uuidString)").path
            let process = try ChildProcess.spawn(RelaisProcess.binary, ["sessions", "revoke", "--config", harness.relay.configPath, "--sub", subject], standardOutput: output)
            #expect(await process.exitStatus(within: .seconds(30)) == 0)
            #expect(try String(contentsOfFile: output, encoding: .utf8) == "revoked 2 session(s)\n")
            for tokens in [first, second] {
                #expect(try await harness.refresh(try #require(tokens["refresh_token"]?.stringValue)).status == 400)
            }
            #expect(try await harness.refresh(try #require(other["refresh_token"]?.stringValue)).status == 200)
            #expect(try await sessions(["list"]).output == "0 live session(s)\n")
            #expect(try await sessions(["list", "--provider", "nope"]).status == 2)
            let unknown = try ChildProcess.spawn(RelaisProcess.binary, ["sessions", "revoke", "--config", harness.relay.configPath, "--sub", subject, "--provider", "nope"])
            #expect(await unknown.exitStatus(within: .seconds(30)) == 2)
            redis.stop()
            #expect(try await sessions(["list"]).status == 1)  // the store is unreachable: an error, not "0 sessions"
        }
    }
}
