import Foundation
import Hummingbird
import NIOCore
import RelaisJOSE
import RelaisTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `relais jwt decode` and `relais jwt verify`, run as the operator would.
@Suite struct JWTCommandTests {
    static let key = try! JWK.generate(for: .es256, keyID: "cli-key")
    static let now = Date().timeIntervalSince1970

    private func path(_ name: String) -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("relais-jwt-\(UUID().uuidString)-\(name)").path
    }

    private func run(_ arguments: [String]) async throws -> (status: Int32?, stdout: String, stderr: String) {
        let out = path("out")
        let err = path("err")
        let process = try ChildProcess.spawn(CommandLineTests.binary, arguments, standardOutput: out, standardError: err)
        let status = await process.exitStatus(within: .seconds(30))
        if status == nil { process.terminate(with: SIGKILL) }
        return (status, (try? String(contentsOfFile: out, encoding: .utf8)) ?? "", (try? String(contentsOfFile: err, encoding: .utf8)) ?? "")
    }

    private func token(_ claims: [String: JSONValue] = [:], removing removed: [String] = []) throws -> String {
        var all: [String: JSONValue] = [
            "iss": .string("https://idp.example/api/v2"), "aud": .string("app"), "sub": .string("user-1"),
            "exp": .number(Self.now + 300), "iat": .number(Self.now), "acr": .string("eidas1"),
        ]
        all.merge(claims) { _, new in new }
        for name in removed { all[name] = nil }
        return try JWS.sign(payload: JSONValue.object(all).serialized(), with: Self.key, algorithm: .es256, extraHeader: ["typ": .string("JWT")])
    }

    private func keyFile() throws -> String {
        let file = path("jwks.json")
        try Data(JWKSet(keys: [Self.key]).publicJSON()).write(to: URL(fileURLWithPath: file))
        return file
    }

    @Test func decodeLabelsItsOutputAsUnverified() async throws {
        let result = try await run(["jwt", "decode", try token()])
        #expect(result.status == 0)
        #expect(result.stdout.contains("NOT VERIFIED"))
        #expect(result.stdout.contains(#""sub" : "user-1""#))
        let jwe = try await run(["jwt", "decode", Base64URLHeader.jwe + ".a.b.c.d"])
        #expect(jwe.status == 0 && jwe.stdout.contains("payload is encrypted"))
        let garbage = try await run(["jwt", "decode", "garbage"])
        #expect(garbage.status == 1)
    }

    @Test func verifyPrintsTheVerifiedClaims() async throws {
        let result = try await run(["jwt", "verify", try token(), "--jwks", try keyFile(), "--iss", "https://idp.example/api/v2", "--aud", "app", "--acr", "eidas1"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains(#""verified" : true"#))
        #expect(result.stdout.contains(#""key" : "cli-key""#))
    }

    /// Like the relay: an id_token checked against a nonce must carry `iat`.
    @Test func verifyWithANonceRequiresIssuedAt() async throws {
        let keys = try keyFile()
        let withIat = try await run(["jwt", "verify", try token(["nonce": .string("n-1")]), "--jwks", keys, "--nonce", "n-1"])
        #expect(withIat.status == 0, "\(withIat.stderr)")
        let withoutIat = try await run(["jwt", "verify", try token(["nonce": .string("n-1")], removing: ["iat"]), "--jwks", keys, "--nonce", "n-1"])
        #expect(withoutIat.status == 1 && withoutIat.stderr.contains("rejected: jwt_iat"), "\(withoutIat.stderr)")
    }

    @Test func verifyNamesTheFailedCheck() async throws {
        let keys = try keyFile()
        let wrongIssuer = try await run(["jwt", "verify", try token(), "--jwks", keys, "--iss", "https://other.example"])
        #expect(wrongIssuer.status == 1)
        #expect(wrongIssuer.stderr.contains("rejected: jwt_iss"))
        let expired = try await run(["jwt", "verify", try token(["exp": .number(Self.now - 3600)]), "--jwks", keys])
        #expect(expired.status == 1 && expired.stderr.contains("rejected: jwt_exp"))
        let lowACR = try await run(["jwt", "verify", try token(), "--jwks", keys, "--acr", "eidas2"])
        #expect(lowACR.status == 1 && lowACR.stderr.contains("rejected: jwt_acr"))
        var parts = try token().split(separator: ".").map(String.init)
        parts[1] = Base64URLHeader.encode(#"{"sub":"admin"}"#)
        let tampered = try await run(["jwt", "verify", parts.joined(separator: "."), "--jwks", keys])
        #expect(tampered.status == 1 && tampered.stderr.contains("rejected: jose_invalid_signature"))
        let unreadable = try await run(["jwt", "verify", try token(), "--jwks", "/nonexistent/jwks.json"])
        #expect(unreadable.status == 2 && unreadable.stderr.contains("cannot open /nonexistent/jwks.json"))
        let missingKeys = try await run(["jwt", "verify", try token()])
        #expect(missingKeys.status != 0 && missingKeys.stderr.contains("--jwks"))
    }

    /// Relais' own access tokens (RFC 9068: `typ` at+jwt) for several APIs carry `client_id`, not
    /// `azp`: `--aud` is enough. The azp rule stays for id_tokens (OpenID Connect Core §3.1.3.7).
    @Test func verifyAcceptsAnAccessTokenForSeveralAudiencesWithoutAzp() async throws {
        let claims: [String: JSONValue] = [
            "iss": .string("https://relais.example"), "aud": .array([.string("https://api-a.example"), .string("https://api-b.example")]),
            "sub": .string("user-1"), "client_id": .string("app"), "scope": .string("openid"), "exp": .number(Self.now + 300), "iat": .number(Self.now),
        ]
        let payload = JSONValue.object(claims).serialized()
        let keys = try keyFile()
        for type in ["at+jwt", "application/at+jwt"] {
            let accessToken = try JWS.sign(payload: payload, with: Self.key, algorithm: .es256, extraHeader: ["typ": .string(type)])
            let verified = try await run(["jwt", "verify", accessToken, "--jwks", keys, "--iss", "https://relais.example", "--aud", "https://api-b.example"])
            #expect(verified.status == 0, "\(type): \(verified.stderr)")
            let otherAPI = try await run(["jwt", "verify", accessToken, "--jwks", keys, "--aud", "https://api-c.example"])
            #expect(otherAPI.status == 1 && otherAPI.stderr.contains("rejected: jwt_aud"), "\(otherAPI.stderr)")
        }
        let idToken = try JWS.sign(payload: payload, with: Self.key, algorithm: .es256, extraHeader: ["typ": .string("JWT")])
        let rejected = try await run(["jwt", "verify", idToken, "--jwks", keys, "--aud", "https://api-b.example"])
        #expect(rejected.status == 1 && rejected.stderr.contains("rejected: jwt_azp"), "\(rejected.stderr)")
    }

    @Test func verifyDecryptsANestedJWEFirst() async throws {
        let decryptionKey = try JWK.generate(for: .es256, keyID: "our-enc", use: "enc", pinAlgorithm: false)
        let recipient = try JWK(object: decryptionKey.publicJSON()!)
        let nested = try JWE.encrypt(Array(try token().utf8), to: recipient, keyAlgorithm: .ecdhES, contentAlgorithm: .a256GCM, extraHeader: ["cty": .string("JWT")])
        let keyPath = path("enc.pem")
        try decryptionKey.privateKeyPEM()!.write(toFile: keyPath, atomically: true, encoding: .utf8)
        let result = try await run(["jwt", "verify", nested, "--jwks", try keyFile(), "--decrypt-key", keyPath, "--iss", "https://idp.example/api/v2"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains(#""sub" : "user-1""#))
        let withoutKey = try await run(["jwt", "verify", nested, "--jwks", try keyFile()])
        #expect(withoutKey.status == 2 && withoutKey.stderr.contains("--decrypt-key"))
        let wrongKeyPath = path("other.pem")
        try JWK.generate(for: .es256, use: "enc", pinAlgorithm: false).privateKeyPEM()!.write(toFile: wrongKeyPath, atomically: true, encoding: .utf8)
        let wrongKey = try await run(["jwt", "verify", nested, "--jwks", try keyFile(), "--decrypt-key", wrongKeyPath])
        #expect(wrongKey.status == 1 && wrongKey.stderr.contains("jose_decryption_failed"))
    }

    @Test func verifyFetchesAJWKSURL() async throws {
        let document = JWKSet(keys: [Self.key]).publicJSON()
        let router = Router()
        router.get("/jwks") { _, _ in Response(status: .ok, body: .init(byteBuffer: ByteBuffer(bytes: document))) }
        let token = try token()
        try await LoopbackHTTPServer.with(router: router) { server in
            let result = try await run(["jwt", "verify", token, "--jwks", server.baseURL + "/jwks"])
            #expect(result.status == 0, "\(result.stderr)")
            let missing = try await run(["jwt", "verify", token, "--jwks", server.baseURL + "/nope"])
            #expect(missing.status == 2 && missing.stderr.contains("HTTP 404"))
        }
    }
}

enum Base64URLHeader {
    static let jwe = encode(#"{"alg":"RSA-OAEP-256","enc":"A256GCM"}"#)
    static func encode(_ text: String) -> String {
        Data(text.utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
