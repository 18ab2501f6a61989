import Foundation
import RelaisClock
import RelaisCrypto
import RelaisHTTPClient
import RelaisJOSE
import RelaisTestSupport
import Testing

extension RelaySignInAndTokensChain {
    /// The person's side of a device request in a browser: the page, the usual sign-in at the
    /// development provider, then the device's poll, over real HTTP.
    @Suite struct RelayDeviceSignInTests {
        static let relayExtra = """
              tv:
                redirect_uris: ["http://127.0.0.1/cb"]
                scopes: [openid, profile]
                device_grant: true
            """

        func poll(_ harness: RelayHarness, _ deviceCode: String) async throws -> [String: JSONValue] {
            let response = try await harness.post(
                harness.issuer + "/token",
                [
                    ("grant_type", "urn:ietf:params:oauth:grant-type:device_code"), ("device_code", deviceCode), ("client_id", "tv"),
                ])
            return try #require(JSONValue.object(from: response.body))
        }

        @Test func aSignInAtTheDevicePageApprovesTheRequest() async throws {
            let harness = try await RelayHarness.launch(relayExtra: Self.relayExtra)
            let started = try #require(JSONValue.object(from: try await harness.post(harness.issuer + "/device_authorization", [("client_id", "tv")]).body))
            let deviceCode = try #require(started["device_code"]?.stringValue)
            let userCode = try #require(started["user_code"]?.stringValue)
            #expect(try await poll(harness, deviceCode)["error"] == .string("authorization_pending"))

            // Another site's form naming the code (its attacker's own device) starts nothing:
            // with a live session at the provider, the person would approve it unawares.
            for (name, value) in [("Sec-Fetch-Site", "cross-site"), ("Sec-Fetch-Site", "same-site"), ("Origin", "https://evil.example")] {
                let forged = try await harness.post(harness.issuer + "/device/sign-in", [("user_code", userCode)], headers: [(name: name, value: value)])
                #expect(forged.status == 400 && forged.header("location") == nil, "\(name): \(value)")
                let denied = try await harness.post(harness.issuer + "/device/deny", [("user_code", userCode)], headers: [(name: name, value: value)])
                #expect(denied.status == 400, "\(name): \(value)")
            }
            harness.clock.advance(by: .seconds(5))  // the polling interval
            #expect(try await poll(harness, deviceCode)["error"] == .string("authorization_pending"))

            // From Relais' own confirmation page, as a browser says it: the browser gets a binding cookie.
            let (toCallback, cookie) = try await signInAtTheProvider(harness, userCode)
            let callback = try await harness.callback(toCallback, cookie: cookie)
            #expect(callback.status == 200)
            #expect(callback.bodyText.contains("device-approved"))
            // The sign-in approved the device; it did not go to any app.
            #expect(callback.header("location") == nil)

            harness.clock.advance(by: .seconds(5))
            let tokens = try await poll(harness, deviceCode)
            let access = try JWS.parse(try #require(tokens["access_token"]?.stringValue, "\(tokens)"))
            let claims = try #require(JSONValue.object(from: access.payload))
            #expect(claims["client_id"] == .string("tv"))
            #expect(claims["acr"] == .string("eidas1"))
            let userinfo = try await harness.userinfo(try #require(tokens["access_token"]?.stringValue))
            #expect(try #require(JSONValue.object(from: userinfo.body))["family_name"] == .string("MERCIER"))

            // The same sign-in page cannot approve it twice.
            harness.clock.advance(by: .seconds(5))
            #expect(try await poll(harness, deviceCode)["error"] == .string("invalid_grant"))
        }

        /// `/device/sign-in` → the provider's page → its redirect to /callback (not followed), and
        /// the binding cookie Relais set on the way.
        func signInAtTheProvider(_ harness: RelayHarness, _ userCode: String, cookie sent: String? = nil) async throws -> (String, String) {
            var headers = [(name: "Sec-Fetch-Site", value: "same-origin")]
            if let sent { headers.append((name: "Cookie", value: sent)) }
            let toProvider = try await harness.post(harness.issuer + "/device/sign-in", [("user_code", userCode)], headers: headers)
            #expect(toProvider.status == 302)
            let setCookie = try #require(toProvider.header("set-cookie"))
            // The harness' relay is on plain http: the cookie cannot be Secure there (so not
            // `__Host-`), or Safari and WKWebView would drop it (BrowserCookies).
            for attribute in ["Path=/", "HttpOnly", "SameSite=Lax"] { #expect(setCookie.contains(attribute), "\(setCookie)") }
            #expect(!setCookie.contains("Secure"), "\(setCookie)")
            let cookie = try #require(setCookie.split(separator: ";").first.map(String.init))
            #expect(cookie.hasPrefix("relais-signin="))
            let authorize = try #require(toProvider.header("location"))
            #expect(authorize.hasPrefix(harness.providerIssuer + "/authorize"))
            let interaction = try await harness.get(authorize)
            let page = try await harness.get(try #require(interaction.header("location"), "\(interaction.status) \(interaction.bodyText)"))
            let action = try #require(page.bodyText.firstMatch(of: /action="([^"]+)"/)?.1)
            let submit = try await harness.post(harness.provider.baseURL + action, [("identity", "pierre")])
            return (try #require(submit.header("location")), cookie)
        }

        /// The provider link a device sign-in starts, sent to someone else: their sign-in comes back
        /// to /callback without the starting browser's cookie (or with their own), and approves
        /// nothing. The page tells them to start from the device's page in their own browser.
        @Test func aDeviceSignInCompletesOnlyInTheBrowserThatStartedIt() async throws {
            let harness = try await RelayHarness.launch(relayExtra: Self.relayExtra)
            let started = try #require(JSONValue.object(from: try await harness.post(harness.issuer + "/device_authorization", [("client_id", "tv")]).body))
            let deviceCode = try #require(started["device_code"]?.stringValue)
            let userCode = try #require(started["user_code"]?.stringValue)
            let otherBrowser = "relais-signin=" + SecureRandom.token(bits: 256)
            for victim in [nil, otherBrowser, "relais-signin=short"] {
                let (toCallback, _) = try await signInAtTheProvider(harness, userCode)
                let callback = try await harness.callback(toCallback, cookie: victim)
                #expect(callback.status == 400, "\(victim ?? "no cookie")")
                #expect(callback.bodyText.contains("another browser") || callback.bodyText.contains("autre navigateur"), "\(callback.bodyText)")
                // No app to go back to: the page leads back to the device's.
                #expect(callback.bodyText.contains(#"<a id="error-back" href="/device">"#), "\(callback.bodyText)")
                harness.clock.advance(by: .seconds(5))
                #expect(try await poll(harness, deviceCode)["error"] == .string("authorization_pending"), "\(victim ?? "no cookie")")
            }
            // The starting browser, with a second device page open meanwhile: one cookie serves both.
            let (first, cookie) = try await signInAtTheProvider(harness, userCode)
            let (_, again) = try await signInAtTheProvider(harness, userCode, cookie: cookie)
            #expect(again == cookie, "a second device page replaced the first one's binding")
            #expect(try await harness.callback(first, cookie: cookie).status == 200)
            harness.clock.advance(by: .seconds(5))
            #expect(try await poll(harness, deviceCode)["access_token"] != nil)
        }
    }
}
