import ArgumentParser
import RelaisJOSE

/// Verification cost of a realistic id_token, end to end: compact parsing, key checks, the
/// signature, and the claim checks a relay runs; then the cost of signing the same token (header,
/// Base64URL, the signature). Single-threaded, like `openssl speed` without `-multi`, so the two
/// figures compare.
struct JOSEBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "jose", abstract: "JWS verification and signing throughput per algorithm.")

    @Option(help: "Seconds per algorithm.")
    var seconds = 3

    @Flag(help: "Also time parsing, signature and claim checks separately (nanoseconds per token).")
    var breakdown = false

    func run() async throws {
        let now = 1_800_000_000.0
        let claims: [String: JSONValue] = [
            "iss": .string("https://oidc.franceconnect.gouv.fr/api/v2"), "aud": .string("6925fb8143c76eded44d32b40c0cb1006065f7f003de52712b78985704f39950"),
            "sub": .string("4d327dd1e427daf4d50296ab71d11f094eb2d3f6d8b6d4c2ab7ddc1f4b5f1e3bv1"), "exp": .number(now + 60), "iat": .number(now),
            "auth_time": .number(now - 5), "nonce": .string("b2f4c8d1e7a9036f5c2e8b1d4a7f0c3e6b9d2a5f8c1e4b7d0a3f6c9e2b5d8a1f"),
            "acr": .string("eidas1"), "amr": .array([.string("fc")]), "given_name": .string("Angela Claire Louise"),
            "family_name": .string("DUBOIS"), "birthdate": .string("1962-08-24"), "gender": .string("female"),
            "birthplace": .string("75107"), "birthcountry": .string("99100"),
        ]
        var policy = ClaimsPolicy(issuer: "https://oidc.franceconnect.gouv.fr/api/v2", audience: "6925fb8143c76eded44d32b40c0cb1006065f7f003de52712b78985704f39950", now: { now })
        policy.nonce = "b2f4c8d1e7a9036f5c2e8b1d4a7f0c3e6b9d2a5f8c1e4b7d0a3f6c9e2b5d8a1f"
        policy.minimumACR = "eidas1"
        policy.acrOrder = ["eidas1", "eidas2", "eidas3"]

        for algorithm in [JWSAlgorithm.es256, .rs256, .edDSA, .hs256] {
            let privateKey = try JWK.generate(for: algorithm, keyID: "bench")
            let verifier = try privateKey.publicJSON().map { try JWK(object: $0) } ?? privateKey
            let keys = JWKSet(keys: [verifier])
            let token = try JWS.sign(payload: JSONValue.object(claims).serialized(), with: privateKey, algorithm: algorithm, extraHeader: ["typ": .string("JWT")])
            var count = 0
            let start = ContinuousClock.now
            let deadline = start + .seconds(seconds)
            while ContinuousClock.now < deadline {
                for _ in 0..<64 {
                    let jws = try JWS.parse(token)
                    try jws.verify(with: keys)
                    _ = try policy.validate(jws)
                }
                count += 64
            }
            let elapsed = ContinuousClock.now - start
            let elapsedSeconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            if breakdown {
                let rounds = 2000
                func time(_ body: () throws -> Void) rethrows -> Int {
                    let start = ContinuousClock.now
                    for _ in 0..<rounds { try body() }
                    let elapsed = ContinuousClock.now - start
                    return Int((elapsed.components.seconds * 1_000_000_000 + elapsed.components.attoseconds / 1_000_000_000) / Int64(rounds))
                }
                let parsed = try JWS.parse(token)
                let parse = try time { _ = try JWS.parse(token) }
                let select = try time { _ = try keys.key(for: algorithm, keyID: "bench") }
                let signature = try time { try parsed.verify(with: verifier) }
                let claimsCheck = try time { _ = try policy.validate(parsed) }
                print("alg=\(algorithm.rawValue) parse_ns=\(parse) select_ns=\(select) verify_ns=\(signature) claims_ns=\(claimsCheck)")
            }
            print(
                "alg=\(algorithm.rawValue) token_bytes=\(token.utf8.count) verifies=\(count) seconds=\(format3(elapsedSeconds)) per_second=\(Int(Double(count) / elapsedSeconds))")
            let payload = JSONValue.object(claims).serialized()
            var signs = 0
            let signStart = ContinuousClock.now
            while ContinuousClock.now < signStart + .seconds(seconds) {
                for _ in 0..<16 { _ = try JWS.sign(payload: payload, with: privateKey, algorithm: algorithm, extraHeader: ["typ": .string("JWT")]) }
                signs += 16
            }
            let signing = ContinuousClock.now - signStart
            let signingSeconds = Double(signing.components.seconds) + Double(signing.components.attoseconds) / 1e18
            print("alg=\(algorithm.rawValue) signs=\(signs) seconds=\(format3(signingSeconds)) sign_per_second=\(Int(Double(signs) / signingSeconds))")
        }
    }
}
