import Foundation
import RelaisHTTPClient
import RelaisJOSE
import RelaisServer
import RelaisTestSupport
import Testing

extension RelaySignInAndTokensChain {
    /// Rate limits per client IP (behind trusted proxies) and per app, and the app-link files.
    @Suite struct RelayLimitsTests {
        @Test func authorizeAndTokenAreRateLimitedPerClientIP() async throws {
            let harness = try await RelayHarness.launch(relayExtra: "rate_limit:\n  per_ip: 3\n  window: 1m", relayEnvironment: ["RELAIS_SERVER_TRUSTED_PROXIES": "127.0.0.1,::1"])
            func authorize(from ip: String) async throws -> HTTPClientResponse {
                try await harness.http.send(
                    HTTPClientRequest(
                        url: FormParameters.url(harness.issuer + "/authorize", adding: RelayHarness.AppRequest().parameters),
                        headers: [(name: "X-Forwarded-For", value: "198.51.100.1, \(ip)")]
                    ))
            }
            for _ in 0..<3 { #expect(try await authorize(from: "203.0.113.7").status == 302) }
            let limited = try await authorize(from: "203.0.113.7")
            #expect(limited.status == 429)
            #expect(Int(limited.header("retry-after") ?? "") ?? 0 > 0)
            #expect(limited.bodyText.contains("too_many_requests"))
            #expect(try await authorize(from: "203.0.113.8").status == 302)  // another client IP
            let token = try await harness.http.send(
                .form(url: harness.issuer + "/token", fields: [("grant_type", "refresh_token")], headers: [(name: "X-Forwarded-For", value: "203.0.113.7")]))
            #expect(token.status == 429)
            #expect(JSONValue.object(from: token.body)?["error"] == .string("too_many_requests"))
        }

        @Test func eachAppHasItsOwnBudget() async throws {
            let harness = try await RelayHarness.launch(relayExtra: "rate_limit:\n  per_client: 2", relayEnvironment: ["RELAIS_SERVER_TRUSTED_PROXIES": "127.0.0.1"])
            var statuses: [Int] = []
            for index in 0..<3 {
                let response = try await harness.http.send(
                    HTTPClientRequest(
                        url: FormParameters.url(harness.issuer + "/authorize", adding: RelayHarness.AppRequest().parameters),
                        headers: [(name: "X-Forwarded-For", value: "203.0.113.\(index + 10)")]
                    ))
                statuses.append(response.status)
            }
            #expect(statuses == [302, 302, 429])
        }

        @Test func appLinkFilesAreServedAsConfigured() async throws {
            let directory = FileManager.default.temporaryDirectory
            let apple = directory.appendingPathComponent("aasa-\(UUID().uuidString).json").path
            let android = directory.appendingPathComponent("assetlinks-\(UUID().uuidString).json").path
            try #"{"applinks":{"details":[{"appIDs":["ABCDE12345.fr.example.app"],"components":[{"/":"/oauth2redirect"}]}]}}"#.write(
                toFile: apple, atomically: true, encoding: .utf8)
            try #"[{"relation":["delegate_permission/common.handle_all_urls"],"target":{"namespace":"android_app","package_name":"fr.example.app"}}]"#.write(
                toFile: android, atomically: true, encoding: .utf8)
            let harness = try await RelayHarness.launch(relayExtra: "well_known:\n  apple_app_site_association_file: \(apple)\n  assetlinks_file: \(android)")
            let aasa = try await harness.get(harness.issuer + "/.well-known/apple-app-site-association")
            #expect(aasa.status == 200 && aasa.header("content-type") == "application/json" && aasa.bodyText.contains("ABCDE12345.fr.example.app"))
            let links = try await harness.get(harness.issuer + "/.well-known/assetlinks.json")
            #expect(links.status == 200 && links.bodyText.contains("fr.example.app"))
        }
    }
}
