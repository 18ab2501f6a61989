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

            // From Relais' own confirmation page, as a browser says it.
            let toProvider = try await harness.post(
                harness.issuer + "/device/sign-in", [("user_code", userCode)], headers: [(name: "Sec-Fetch-Site", value: "same-origin")])
            #expect(toProvider.status == 302)
            let authorize = try #require(toProvider.header("location"))
            #expect(authorize.hasPrefix(harness.providerIssuer + "/authorize"))
            let interaction = try await harness.get(authorize)
            let page = try await harness.get(try #require(interaction.header("location"), "\(interaction.status) \(interaction.bodyText)"))
            let action = try #require(page.bodyText.firstMatch(of: /action="([^"]+)"/)?.1)
            let submit = try await harness.post(harness.provider.baseURL + action, [("identity", "pierre")])
            let callback = try await harness.callback(try #require(submit.header("location")))
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
    }
}
