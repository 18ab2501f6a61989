import ArgumentParser
import FoundationEssentials
import RelaisAttest
import RelaisClock
import RelaisCrypto
import RelaisHTTPClient
import RelaisJOSE

/// What DPoP and attestation cost a running Relais, measured as ratios within one run: `/userinfo`
/// with a DPoP-bound token and a fresh proof per request against the same with a bearer token, and
/// `/token` (refresh grant) with an attestation PoP and a DPoP proof against a plain refresh. Proofs
/// are signed before each timed round, so the figures are the server's cost, not the client's.
struct MobileBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "mobile", abstract: "DPoP /userinfo and attested /token as ratios of their plain forms.")

    @Option(help: "Relais' base URL (its issuer).") var relay: String
    @Option(help: "An app with attestation allowed, on a relay with the development attester.") var clientID = "bench-app"
    @Option(help: "Requests per /userinfo round.") var requests = 6000
    @Option(help: "Refreshes per /token round.") var refreshes = 600
    @Option(help: "Requests in flight at once.") var concurrency = 8
    @Option(help: "Alternating rounds; the best of each kind counts.") var rounds = 3

    func run() async throws {
        let http = HTTPClient(configuration: .init(maxConcurrentRequests: concurrency * 2))
        let signIn = try SignInBench.parse(["--relay", relay, "--client-id", clientID])
        let key = try JWK.generate(for: .es256)
        let bearer = try await signIn.signIn(http).tokens
        let attestation = try await attest(http, key: key)
        let bound = try await signIn.signIn(http, tokenHeaders: try tokenHeaders(key, attestation: attestation)).tokens
        guard bound["token_type"] == "DPoP", let boundAccess = bound["access_token"], let bearerAccess = bearer["access_token"] else {
            throw BenchError("the attested sign-in did not give DPoP-bound tokens")
        }

        let userinfo = relay + "/userinfo"
        var bearerRates: [Double] = [], dpopRates: [Double] = []
        var plainRefresh: [Double] = [], attestedRefresh: [Double] = []
        guard var plainToken = bearer["refresh_token"], var attestedToken = bound["refresh_token"] else { throw BenchError("no refresh tokens") }
        for _ in 0..<rounds {
            bearerRates.append(try await rate(http, count: requests) { _ in .init(url: userinfo, headers: [("Authorization", "Bearer \(bearerAccess)")]) })
            let proofs = try (0..<requests).map { _ in try dpopProof(key, "GET", userinfo, accessToken: boundAccess) }
            dpopRates.append(
                try await rate(http, count: requests) { index in
                    .init(url: userinfo, headers: [("Authorization", "DPoP \(boundAccess)"), ("DPoP", proofs[index])])
                })
            let (plainRate, plainNext) = try await refreshChain(http, token: plainToken, count: refreshes) { _ in [] }
            plainRefresh.append(plainRate)
            plainToken = plainNext
            let headers = try (0..<refreshes).map { _ in try tokenHeaders(key, attestation: attestation) }
            let (attestedRate, attestedNext) = try await refreshChain(http, token: attestedToken, count: refreshes) { headers[$0] }
            attestedRefresh.append(attestedRate)
            attestedToken = attestedNext
        }
        try await http.shutdown()
        let best = { (values: [Double]) in values.max() ?? 0 }
        print("measure=userinfo bearer_rps=\(format(best(bearerRates))) dpop_rps=\(format(best(dpopRates))) ratio=\(format(best(dpopRates) / best(bearerRates)))")
        print(
            "measure=refresh plain_rps=\(format(best(plainRefresh))) attested_dpop_rps=\(format(best(attestedRefresh))) ratio=\(format(best(attestedRefresh) / best(plainRefresh)))"
        )
    }

    /// The development attester: a challenge, then a Client Attestation JWT for `key`.
    private func attest(_ http: HTTPClient, key: JWK) async throws -> String {
        let challenge = try await http.send(.form(url: relay + "/attest/challenge", fields: [("client_id", clientID)]))
        guard let value = JSONValue.object(from: challenge.body)?["attestation_challenge"]?.stringValue else { throw BenchError("challenge: \(challenge.bodyText)") }
        let jwk = String(decoding: JSONValue.object(key.publicJSON() ?? [:]).serialized(), as: UTF8.self)
        let answer = try await http.send(.form(url: relay + "/attest/dev", fields: [("client_id", clientID), ("challenge", value), ("jwk", jwk)]))
        guard let attestation = JSONValue.object(from: answer.body)?["client_attestation"]?.stringValue else {
            throw BenchError("the relay has no development attester for \(clientID): \(answer.bodyText)")
        }
        return attestation
    }

    private func tokenHeaders(_ key: JWK, attestation: String) throws -> [(name: String, value: String)] {
        let now = SystemClock().now.rounded(.down)
        let pop = try JWS.sign(
            payload: JSONValue.object(["iss": .string(clientID), "aud": .string(relay), "jti": .string(SecureRandom.token(bits: 96)), "iat": .number(now)]).serialized(),
            with: key, algorithm: .es256, extraHeader: ["typ": .string("oauth-client-attestation-pop+jwt")]
        )
        return [("OAuth-Client-Attestation", attestation), ("OAuth-Client-Attestation-PoP", pop), ("DPoP", try dpopProof(key, "POST", relay + "/token"))]
    }

    private func dpopProof(_ key: JWK, _ method: String, _ url: String, accessToken: String? = nil) throws -> String {
        var claims: [String: JSONValue] = [
            "jti": .string(SecureRandom.token(bits: 96)), "htm": .string(method), "htu": .string(url), "iat": .number(SystemClock().now.rounded(.down)),
        ]
        if let accessToken { claims["ath"] = .string(Base64URL.encode(SHA256.hash(Array(accessToken.utf8)))) }
        return try JWS.sign(
            payload: JSONValue.object(claims).serialized(), with: key, algorithm: .es256,
            extraHeader: ["typ": .string("dpop+jwt"), "jwk": .object(key.publicJSON() ?? [:])]
        )
    }

    /// Requests per second for `count` requests, `concurrency` in flight; every answer must be 200.
    private func rate(_ http: HTTPClient, count: Int, _ request: @escaping @Sendable (Int) -> HTTPClientRequest) async throws -> Double {
        let start = ContinuousClock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            for worker in 0..<concurrency {
                group.addTask {
                    for index in stride(from: worker, to: count, by: concurrency) {
                        let response = try await http.send(request(index))
                        guard response.status == 200 else { throw BenchError("HTTP \(response.status): \(response.bodyText.prefix(200))") }
                    }
                }
            }
            try await group.waitForAll()
        }
        return Double(count) / seconds(ContinuousClock.now - start)
    }

    /// Refreshes one after another (each needs the token the previous returned): refreshes per second.
    private func refreshChain(
        _ http: HTTPClient, token: String, count: Int, headers: (Int) -> [(name: String, value: String)]
    ) async throws -> (Double, String) {
        var current = token
        let start = ContinuousClock.now
        for index in 0..<count {
            let response = try await http.send(
                .form(
                    url: relay + "/token",
                    fields: [
                        ("grant_type", "refresh_token"), ("client_id", clientID), ("refresh_token", current),
                    ], headers: headers(index)))
            guard response.status == 200, let next = JSONValue.object(from: response.body)?["refresh_token"]?.stringValue else {
                throw BenchError("refresh: HTTP \(response.status) \(response.bodyText.prefix(200))")
            }
            current = next
        }
        return (Double(count) / seconds(ContinuousClock.now - start), current)
    }

    private func seconds(_ duration: Duration) -> Double { Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18 }
    /// Two decimals, always ("0.60", not "0.6"), without Foundation's formatter.
    private func format(_ value: Double) -> String {
        let hundredths = Int((value * 100).rounded())
        let fraction = hundredths % 100
        return "\(hundredths / 100).\(fraction < 10 ? "0" : "")\(fraction)"
    }
}

/// App Attest verification, one thread: Apple's published sample attestation checked against the
/// pinned root at a time its chain was valid, every step of Apple's guide included.
struct AttestBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "app-attest", abstract: "Time per App Attest attestation verification.")

    @Option(help: "File holding Apple's sample attestation (base64).") var sample = "Tests/RelaisAttestTests/Fixtures/apple-sample-attestation.b64"
    @Option(help: "Verifications.") var count = 400

    func run() async throws {
        let text = try String(contentsOfFile: sample, encoding: .utf8).filter { !$0.isWhitespace }
        guard let object = Base64.decode(text), let keyID = Base64.decode("bSrEhF8TIzIvWSPwvZ0i2+UOBre4ASH84rK15m6emNY=") else { throw BenchError("unreadable sample") }
        let verifier = AppAttestVerifier(appID: "0352187391.com.apple.example_app_attest", environment: .production)
        let at = Date(timeIntervalSince1970: 1_713_398_400)  // 2024-04-18T00:00:00Z
        let hash = Array("test_server_challenge".utf8)
        var times: [Double] = []
        for _ in 0..<count {
            let start = ContinuousClock.now
            _ = try await verifier.verifyAttestation(object, keyID: keyID, clientDataHash: hash, at: at)
            let elapsed = ContinuousClock.now - start
            times.append(Double(elapsed.components.seconds) * 1e6 + Double(elapsed.components.attoseconds) / 1e12)
        }
        times.sort()
        print(
            "measure=app_attest count=\(count) median_us=\(Int(times[count / 2])) p99_us=\(Int(times[min(count - 1, count * 99 / 100)])) per_second=\(Int(1e6 / times[count / 2]))")
    }
}
