import Foundation
import RelaisCrypto
import RelaisHTTPClient
import RelaisJOSE
import RelaisServer
import RelaisTestSupport
import Testing

extension RelaySignInAndTokensChain {
    /// "Tokens, secrets and identity claims are never logged at any level": Relais runs at `trace`
    /// through a whole life (sign-in, exchange, replay, refresh, userinfo, gateways, introspection,
    /// revocation, logout, failed sign-ins), then its log is searched for every secret it handled.
    @Suite struct RelayLogHygieneTests {
        @Test func nothingSecretReachesTheLogEvenAtTrace() async throws {
            let introspectionSecret = "orders-introspection-secret-0123456789"
            let harness = try await RelayHarness.launch(
                inProcess: false,
                relayExtra: "resource_servers:\n  orders:\n    secret: \(introspectionSecret)",
                relayEnvironment: ["RELAIS_LOG_LEVEL": "trace"]
            )
            var secrets: [(String, String)] = [
                ("provider client secret", RelayHarness.providerSecret), ("introspection secret", introspectionSecret),
            ]

            // Sign-in, by hand so the provider's code and state are known too.
            let request = RelayHarness.AppRequest()
            secrets.append(("code_verifier", request.verifier))
            let toRelay = try await harness.throughProvider(request)
            let providerCallback = try RelayHarness.query(toRelay)
            secrets.append(("provider code", try #require(providerCallback["code"])))
            secrets.append(("provider state", try #require(providerCallback["state"])))
            let landing = try await harness.callback(toRelay)
            let landingLocation = try #require(landing.header("location"))
            let code = try #require(try RelayHarness.query(landingLocation)["code"])
            secrets.append(("Relais code", code))
            let exchanged = try await harness.exchange(code, request)
            #expect(exchanged.status == 200)
            let tokens = try #require(JSONValue.object(from: exchanged.body))
            let accessToken = try #require(tokens["access_token"]?.stringValue)
            let refreshToken = try #require(tokens["refresh_token"]?.stringValue)
            let idToken = try #require(tokens["id_token"]?.stringValue)
            secrets += [("access token", accessToken), ("refresh token", refreshToken), ("Relais id_token", idToken)]
            let claims = try #require(JSONValue.object(from: try await harness.userinfo(accessToken).body))
            let subject = try #require(claims["sub"]?.stringValue)
            for name in ["given_name", "family_name", "birthdate", "email"] {
                secrets.append((name, try #require(claims[name]?.stringValue)))
            }
            secrets.append(("pairwise sub", subject))

            // Refusals log warnings: they must not quote what was presented.
            let wrongVerifier = RelayHarness.AppRequest()
            let second = try await harness.signIn(wrongVerifier)
            let secondCode = try #require(second["code"])
            secrets.append(("second Relais code", secondCode))
            var tampered = wrongVerifier
            tampered.verifier = SecureRandom.token(bits: 256)
            secrets.append(("wrong code_verifier", tampered.verifier))
            #expect(try await harness.exchange(secondCode, tampered).status == 400)

            // Refresh, then the old refresh token after rotation: the reuse path.
            let refreshed = try await harness.refresh(refreshToken)
            let rotated = try #require(JSONValue.object(from: refreshed.body))
            let newAccess = try #require(rotated["access_token"]?.stringValue)
            let newRefresh = try #require(rotated["refresh_token"]?.stringValue)
            secrets += [("rotated access token", newAccess), ("rotated refresh token", newRefresh)]

            // Gateways and APIs, with good and bad credentials.
            for path in ["/auth", "/auth?session=1", "/userinfo"] {
                _ = try await harness.http.send(HTTPClientRequest(url: harness.issuer + path, headers: [(name: "Authorization", value: "Bearer \(newAccess)")]))
                _ = try await harness.http.send(HTTPClientRequest(url: harness.issuer + path, headers: [(name: "Authorization", value: "Bearer \(newAccess)x")]))
            }
            // Under /auth/** the path is the guarded request's, which may name the person.
            let email = try #require(claims["email"]?.stringValue)
            _ = try await harness.http.send(
                HTTPClientRequest(url: harness.issuer + "/auth/people/\(email)/orders", headers: [(name: "Authorization", value: "Bearer \(newAccess)")]))
            let basic = Base64.encode(Array("orders:\(introspectionSecret)".utf8))
            let wrongBasic = "orders:wrong-\(introspectionSecret)"
            secrets.append(("wrong introspection secret", "wrong-\(introspectionSecret)"))
            #expect(try await harness.post(harness.issuer + "/introspect", [("token", newAccess)], headers: [(name: "Authorization", value: "Basic \(basic)")]).status == 200)
            #expect(
                try await harness.post(
                    harness.issuer + "/introspect", [("token", newAccess)], headers: [(name: "Authorization", value: "Basic \(Base64.encode(Array(wrongBasic.utf8)))")]
                ).status == 401)

            // Failed sign-ins log the reason: the reason must not carry the nonce or the subjects.
            for fault in ["id_token:wrong_nonce", "userinfo:sub_mismatch", "id_token:bad_signature", "token:malformed"] {
                try await harness.armProvider(fault)
                let failed = try await harness.callback(try await harness.throughProvider(RelayHarness.AppRequest()))
                #expect(failed.status == 302)
            }

            // Revocation, reuse of a revoked refresh token, API logout.
            #expect(try await harness.post(harness.issuer + "/revoke", [("token", newRefresh), ("client_id", "app")]).status == 200)
            #expect(try await harness.refresh(newRefresh).status == 400)
            let third = try await harness.tokens()
            let thirdRefresh = try #require(third["refresh_token"]?.stringValue)
            secrets.append(("third refresh token", thirdRefresh))
            #expect(try await harness.post(harness.issuer + "/logout", [("client_id", "app"), ("refresh_token", thirdRefresh)]).status == 204)

            // A provider error whose strings try to forge log lines (text format, the default).
            let forging = try RelayHarness.query(try await harness.throughProvider(RelayHarness.AppRequest()))
            let forged = "%0A2026-01-01T00:00:00.000Z%20critical%20relais:%20FORGED-LINE%0D%1B%5B2K"
            let providerError = try await harness.callback(
                harness.issuer + "/callback?state=\(try #require(forging["state"]))&iss=\(try #require(forging["iss"]))&error=server_error\(forged)&error_description=x\(forged)"
            )
            #expect(providerError.status == 302)

            // A replayed code (this revokes the session it opened, with a warning).
            #expect(try await harness.exchange(code, request).status == 400)

            let log = try #require(harness.relay as? RelaisProcess).log
            // The log is really there and really at trace: one access line per request at least.
            #expect(log.components(separatedBy: "request").count > 30, "the relay log is unexpectedly short:\n\(log.prefix(2000))")
            // The forged strings stay inside their own line, escaped: no line starts with them, no raw
            // carriage return or escape sequence is written.
            let forgedLines = log.split(separator: "\n").filter { $0.contains("FORGED-LINE") }
            #expect(forgedLines.count == 1 && forgedLines.allSatisfy { $0.contains("provider returned an error") && $0.contains(#"\n2026-01-01"#) })
            #expect(!log.contains("\r") && !log.contains("\u{1B}"))
            // Names only in the failure message: quoting the log would print the secrets again.
            let leaked = secrets.filter { log.contains($0.1) }.map(\.0)
            #expect(leaked.isEmpty, "in the relay log: \(leaked.joined(separator: ", "))")
            // And no JWT of any kind (the provider's id_token and access token included): `eyJ` (a
            // base64url JSON object) then a dot. Random request ids may contain `eyJ` by chance
            // (about one test run in 200), never a dot.
            let jwtLeaked = log.split(separator: "eyJ").dropFirst().contains { part in
                part.prefix { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" }.count >= 10
                    && part.drop { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" }.hasPrefix(".")
            }
            #expect(!jwtLeaked, "a JWT appears in the relay log")
        }
    }
}
