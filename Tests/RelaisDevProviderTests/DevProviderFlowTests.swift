import Foundation
import RelaisClock
import RelaisCrypto
import RelaisHTTPClient
import RelaisJOSE
import RelaisServer
import RelaisTestSupport
import Testing

extension DevProviderProcessTests {
    /// FranceConnect v2 behaviour of the development provider, driven over real HTTP.
    @Suite struct DevProviderFlowTests {
        @Test func discoveryDescribesAFranceConnectV2Provider() async throws {
            let client = try await ProviderClient.launch()
            let document = try #require(JSONValue.object(from: try await client.get(client.issuer + "/.well-known/openid-configuration").body))
            #expect(document["issuer"] == .string(client.issuer))
            #expect(document["authorization_endpoint"] == .string(client.issuer + "/authorize"))
            #expect(document["token_endpoint"] == .string(client.issuer + "/token"))
            #expect(document["userinfo_endpoint"] == .string(client.issuer + "/userinfo"))
            #expect(document["end_session_endpoint"] == .string(client.issuer + "/session/end"))
            #expect(document["jwks_uri"] == .string(client.issuer + "/jwks"))
            #expect(document["acr_values_supported"] == .array([.string("eidas1")]))
            #expect(document["authorization_response_iss_parameter_supported"] == .bool(true))
            #expect(document["token_endpoint_auth_methods_supported"] == .array([.string("client_secret_post"), .string("private_key_jwt")]))
            let keys = try await client.jwks()
            #expect(keys.keys.map(\.algorithm) == ["ES256", "RS256"])
            #expect(keys.keys.allSatisfy { !$0.isPrivate })
        }

        @Test func aSignInEndsWithVerifiableTokensAndScopedUserinfo() async throws {
            let client = try await ProviderClient.launch()
            let callback = try await client.signIn(as: "angela", client.authorizeParameters(scope: "openid profile"))
            #expect(callback["state"] == "state-app-1234")
            #expect(callback["iss"] == client.issuer)
            let code = try #require(callback["code"])
            let response = try await client.exchange(code: code)
            #expect(response.status == 200)
            #expect(response.header("cache-control") == "no-store")
            let tokens = try #require(JSONValue.object(from: response.body))
            #expect(tokens["token_type"] == .string("Bearer"))
            #expect(tokens["expires_in"] == .number(60))
            #expect(tokens["refresh_token"] == nil)
            let accessToken = try #require(tokens["access_token"]?.stringValue)
            let idToken = try await client.verify(try #require(tokens["id_token"]?.stringValue))
            #expect(idToken.acr == "eidas1")
            #expect(idToken["auth_time"]?.numberValue != nil)
            #expect(idToken.expiration! - idToken.issuedAt! == 60)
            #expect(idToken["at_hash"] == .string(Base64URL.encode(SHA256.hash(Array(accessToken.utf8)).prefix(16))))
            #expect(idToken["amr"] == nil)  // only when asked through `claims`

            let userinfo = try await client.userinfo(accessToken)
            #expect(userinfo.status == 200)
            #expect(userinfo.header("content-type") == "application/jwt")
            let claims = try await client.verify(userinfo.bodyText, nonce: nil)
            #expect(claims.subject == idToken.subject)
            #expect(claims.string("given_name") == "Angela Claire Louise")
            #expect(claims["given_name_array"] == .array([.string("Angela"), .string("Claire"), .string("Louise")]))
            #expect(claims.string("family_name") == "DUBOIS")
            #expect(claims.string("birthdate") == "1962-08-24")
            #expect(claims["birthplace"] == nil)  // `birth` was not granted
            #expect(claims["email"] == nil)
        }

        @Test func subjectsArePairwiseStablePerClientAndDifferentAcrossSectors() async throws {
            let client = try await ProviderClient.launch()
            func subject(_ identity: String, _ app: String) async throws -> String {
                let tokens = try await client.tokens(as: identity, client: app)
                let idToken = try #require(tokens["id_token"]?.stringValue)
                let claims = try await client.verify(idToken, audience: app)
                return try #require(claims.subject)
            }
            let first = try await subject("angela", "app")
            #expect(try await subject("angela", "app") == first)
            #expect(try await subject("angela", "other") != first)
            #expect(try await subject("pierre", "app") != first)
            #expect(first.count == 66 && first.hasSuffix("v1"))
        }

        @Test func amrIsReleasedWhenRequestedThroughClaims() async throws {
            let client = try await ProviderClient.launch()
            let parameters = client.authorizeParameters() + [("claims", #"{"id_token":{"amr":{"essential":true}}}"#)]
            let callback = try await client.signIn(as: "pierre", parameters)
            let code = try #require(callback["code"])
            let tokens = try #require(JSONValue.object(from: try await client.exchange(code: code).body))
            let claims = try await client.verify(try #require(tokens["id_token"]?.stringValue))
            #expect(claims["amr"] == .array([.string("pwd")]))
        }

        @Test func anRS256ClientGetsRS256Tokens() async throws {
            let client = try await ProviderClient.launch()
            let tokens = try await client.tokens(client: "rs")
            let jws = try JWS.parse(try #require(tokens["id_token"]?.stringValue))
            #expect(jws.algorithm == .rs256)
            _ = try await client.verify(try #require(tokens["id_token"]?.stringValue), audience: "rs")
            let userinfo = try await client.userinfo(try #require(tokens["access_token"]?.stringValue))
            #expect(try JWS.parse(userinfo.bodyText).algorithm == .rs256)
        }

        @Test func clientAndRedirectErrorsArePagesNeverRedirects() async throws {
            let client = try await ProviderClient.launch()
            func page(_ change: (inout [(String, String)]) -> Void) async throws -> (Int, String?, String?) {
                var parameters = client.authorizeParameters()
                change(&parameters)
                let response = try await client.authorize(parameters)
                let code = response.bodyText.firstMatch(of: /id="error-code">([^<]+)</)?.1
                return (response.status, code.map(String.init), response.header("location"))
            }
            func set(_ name: String, _ value: String?) -> (inout [(String, String)]) -> Void {
                { parameters in
                    parameters.removeAll { $0.0 == name }
                    if let value { parameters.append((name, value)) }
                }
            }
            #expect(try await page(set("client_id", "nobody")) == (400, "Y04EA6EF", nil))
            #expect(try await page(set("client_id", nil)) == (400, "Y030007", nil))
            #expect(try await page(set("redirect_uri", "https://evil.example/cb")) == (400, "Y04C013C", nil))
            #expect(try await page(set("redirect_uri", "http://127.0.0.1:9/callback/extra")) == (400, "Y04C013C", nil))
            #expect(try await page(set("redirect_uri", nil)) == (400, "Y030007", nil))
            #expect(try await page { $0.append(("client_id", "app")) } == (400, "Y030007", nil))
            // FranceConnect's AuthorizeParamsDto is checked before any redirect: a missing required
            // parameter, a nonce under 22 characters, a prompt other than login/consent leave the
            // person on FranceConnect's error page (api-authorize.feature, "erreur Y030007", rows
            // acr_values, nonce, response_type, scope, state, nonce_trop_court, prompt none/select_account).
            for missing in ["acr_values", "nonce", "response_type", "scope", "state"] {
                #expect(try await page(set(missing, nil)) == (400, "Y030007", nil), "\(missing)")
            }
            for nonce in ["", "nonce_trop_court"] { #expect(try await page(set("nonce", nonce)) == (400, "Y030007", nil), "\(nonce)") }
            for prompt in ["", "none", "select_account", "login none"] {
                #expect(try await page(set("prompt", prompt)) == (400, "Y030007", nil), "\(prompt)")
            }
            let html = try await client.authorize([("client_id", "<script>")]).bodyText
            #expect(!html.contains("<script>"))
        }

        @Test func otherErrorsGoBackToTheClientWithStateAndIssuer() async throws {
            let client = try await ProviderClient.launch()
            func outcome(_ change: (inout [(String, String)]) -> Void) async throws -> String? {
                var parameters = client.authorizeParameters()
                change(&parameters)
                let response = try await client.authorize(parameters)
                #expect(response.status == 303)
                let location = try #require(response.header("location"))
                #expect(location.hasPrefix("http://127.0.0.1:9/callback?"))
                let query = try ProviderClient.query(of: location)
                #expect(query["iss"] == client.issuer)
                if let state = parameters.first(where: { $0.0 == "state" })?.1 { #expect(query["state"] == state) }
                #expect(query["error_description"]?.isEmpty == false)
                return query["error"]
            }
            func replace(_ name: String, _ value: String?) -> (inout [(String, String)]) -> Void {
                { parameters in
                    parameters.removeAll { $0.0 == name }
                    if let value { parameters.append((name, value)) }
                }
            }
            // Present but wrong: FranceConnect redirects (api-authorize.feature, "Erreur <error> avec
            // response_type", "erreur invalid_request scope"); missing ones are pages (the test above).
            #expect(try await outcome(replace("response_type", "token")) == "unsupported_response_type")
            #expect(try await outcome(replace("response_type", "")) == "invalid_request")
            #expect(try await outcome(replace("acr_values", "eidas2")) == "invalid_acr")
            #expect(try await outcome(replace("scope", "profile")) == "invalid_request")
            #expect(try await outcome(replace("scope", "")) == "invalid_request")
            #expect(try await outcome(replace("state", "")) == "invalid_request")
            #expect(try await outcome(replace("claims", "{not json")) == "invalid_request")
            #expect(try await outcome(replace("code_challenge", "abc")) == "invalid_request")  // unknown parameter
            #expect(try await outcome { $0.append(("scope", "openid")) } == "invalid_request")  // repeated
        }

        @Test func postAuthorizeWorksLikeGet() async throws {
            let client = try await ProviderClient.launch()
            let response = try await client.post(client.issuer + "/authorize", client.authorizeParameters())
            #expect(response.status == 303)
            #expect(response.header("location")?.hasPrefix(client.issuer + "/interaction/") == true)
        }

        @Test func cancellingReturnsAccessDenied() async throws {
            let client = try await ProviderClient.launch()
            let login = try await client.openLoginPage(client.authorizeParameters())
            #expect(login.page.contains(#"id="identity-angela""#) && login.page.contains(#"id="identity-karima""#))
            #expect(login.page.contains(#"id="cancel""#))
            let response = try await client.post(login.action, [("cancel", "1")])
            let query = try ProviderClient.query(of: try #require(response.header("location")))
            #expect(query["error"] == "access_denied")
            #expect(query["state"] == "state-app-1234")
            #expect(query["iss"] == client.issuer)
            // The interaction is spent: submitting again shows the expiry page.
            let again = try await client.post(login.action, [("identity", "angela")])
            #expect(again.status == 400 && again.bodyText.contains("DP_INTERACTION_EXPIRED"))
            let unknown = try await client.openLoginPage(client.authorizeParameters())
            #expect(try await client.post(unknown.action, [("identity", "nobody")]).status == 400)
        }

        @Test func codesAreSingleUseAndBoundToTheirClientAndRedirect() async throws {
            let client = try await ProviderClient.launch()
            func error(_ response: HTTPClientResponse) -> String? { JSONValue.object(from: response.body)?["error"]?.stringValue }
            let code = try #require(try await client.signIn()["code"])
            let wrongSecret = try await client.exchange(code: code, secret: "wrong")
            #expect(wrongSecret.status == 401 && error(wrongSecret) == "invalid_client")
            let wrongRedirect = try await client.exchange(code: code, redirectURI: "com.example.app:/oauth")
            #expect(wrongRedirect.status == 400 && error(wrongRedirect) == "invalid_grant")
            // The failed attempt above consumed the code, as a real provider would.
            let replay = try await client.exchange(code: code)
            #expect(replay.status == 400 && error(replay) == "invalid_grant")

            let otherCode = try #require(try await client.signIn()["code"])
            let stolen = try await client.exchange(code: otherCode, client: "other", redirectURI: ProviderClient.redirects["app"])
            #expect(stolen.status == 400 && error(stolen) == "invalid_grant")

            let fresh = try #require(try await client.signIn()["code"])
            #expect(try await client.exchange(code: fresh).status == 200)
            #expect(error(try await client.exchange(code: fresh)) == "invalid_grant")
        }

        @Test func tokenRequestErrorsAreFranceConnectShaped() async throws {
            let client = try await ProviderClient.launch()
            let token = client.issuer + "/token"
            func error(_ response: HTTPClientResponse) -> String? { JSONValue.object(from: response.body)?["error"]?.stringValue }
            let secret = ProviderClient.secrets["app"]!
            let base = [("client_id", "app"), ("client_secret", secret), ("redirect_uri", ProviderClient.redirects["app"]!)]
            let unsupported = try await client.post(token, base + [("grant_type", "refresh_token"), ("refresh_token", "x")])
            #expect(unsupported.status == 400 && error(unsupported) == "unsupported_grant_type")
            let missingCode = try await client.post(token, base + [("grant_type", "authorization_code")])
            #expect(missingCode.status == 400 && error(missingCode) == "invalid_request")
            let unknownClient = try await client.post(token, [("client_id", "nobody"), ("client_secret", "x"), ("grant_type", "authorization_code"), ("code", "c")])
            #expect(unknownClient.status == 401 && error(unknownClient) == "invalid_client")
            let basic = try await client.post(token, [("grant_type", "authorization_code"), ("code", "c")], headers: [(name: "Authorization", value: "Basic YXBwOnNlY3JldA==")])
            #expect(basic.status == 401 && error(basic) == "invalid_client")
            let json = try await client.http.send(
                HTTPClientRequest(method: .post, url: token, headers: [(name: "Content-Type", value: "application/json")], body: Array("{}".utf8)))
            #expect(json.status == 400 && error(json) == "invalid_request")
            let repeated = try await client.post(token, base + [("grant_type", "authorization_code"), ("code", "a"), ("code", "b")])
            #expect(repeated.status == 400 && error(repeated) == "invalid_request")
        }

        @Test func userinfoRefusesMissingAndUnknownTokens() async throws {
            let client = try await ProviderClient.launch()
            let missing = try await client.get(client.issuer + "/userinfo")
            #expect(missing.status == 401)
            #expect(missing.header("www-authenticate")?.hasPrefix("Bearer") == true)
            let unknown = try await client.userinfo("not-a-token")
            #expect(unknown.status == 401)
            #expect(unknown.header("www-authenticate")?.contains(#"error="invalid_token""#) == true)
            #expect(JSONValue.object(from: unknown.body)?["error"] == .string("invalid_token"))
        }

        @Test func codesAndAccessTokensExpire() async throws {
            let client = try await ProviderClient.launch(provider: "  code_lifetime: 1s\n  access_token_lifetime: 1s")
            let code = try #require(try await client.signIn()["code"])
            let live = try #require(try await client.tokens()["access_token"]?.stringValue)
            client.clock.advance(by: .milliseconds(2200))
            #expect(JSONValue.object(from: try await client.exchange(code: code).body)?["error"] == .string("invalid_grant"))
            #expect(try await client.userinfo(live).status == 401)
        }

        @Test func theBrowserSessionOffersToContinueUntilLogout() async throws {
            let client = try await ProviderClient.launch()
            let tokens = try await client.tokens(as: "karima")
            #expect(client.cookie != nil)
            let second = try await client.openLoginPage(client.authorizeParameters())
            #expect(second.page.contains(#"id="continue""#))
            #expect(second.page.contains("Karima Nour BENALI"))
            let forced = try await client.openLoginPage(client.authorizeParameters() + [("prompt", "login")])
            #expect(!forced.page.contains(#"id="continue""#))

            let idToken = try #require(tokens["id_token"]?.stringValue)
            let logout = try await client.get(
                FormParameters.url(
                    client.issuer + "/session/end",
                    adding: [
                        ("id_token_hint", idToken), ("state", "bye-1"), ("post_logout_redirect_uri", "http://127.0.0.1:9/logged-out"),
                    ])
            )
            #expect(logout.status == 303)
            #expect(logout.header("location") == "http://127.0.0.1:9/logged-out?state=bye-1")
            #expect(client.cookie == nil)
            let after = try await client.openLoginPage(client.authorizeParameters())
            #expect(!after.page.contains(#"id="continue""#))
        }

        @Test func logoutErrorsArePages() async throws {
            let client = try await ProviderClient.launch()
            let idToken = try #require(try await client.tokens()["id_token"]?.stringValue)
            func code(_ parameters: [(String, String)]) async throws -> String? {
                let response = try await client.get(FormParameters.url(client.issuer + "/session/end", adding: parameters))
                #expect(response.status == 400)
                #expect(response.header("location") == nil)
                return response.bodyText.firstMatch(of: /id="error-code">([^<]+)</).map { String($0.1) }
            }
            let target = ("post_logout_redirect_uri", "http://127.0.0.1:9/logged-out")
            #expect(try await code([("state", "s"), target]) == "Y030007")
            #expect(try await code([("id_token_hint", "forged.token.value"), ("state", "s"), target]) == "DP_ID_TOKEN_HINT")
            #expect(try await code([("id_token_hint", idToken), ("state", "s"), ("post_logout_redirect_uri", "https://evil.example/")]) == "DP_POST_LOGOUT_URI")
        }
    }
}
