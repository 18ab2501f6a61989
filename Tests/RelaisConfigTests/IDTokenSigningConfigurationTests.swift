import Foundation
import RelaisCrypto
import RelaisJOSE
import RelaisTestSupport
import Testing

@testable import RelaisConfig

/// OpenID Connect Discovery 1.0 §3: id_tokens are signed RS256 unless an app asks for ES256, so
/// production needs an RSA key beside the EC one (`signing.active_rsa_key`); issue 33, finding 9.
@Suite(.tags(.fast)) struct IDTokenSigningConfigurationTests {
    private func file(_ contents: String) throws -> String {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("relais-idtoken-\(UUID().uuidString)")
        try contents.write(to: url, atomically: true, encoding: .utf8)
        return url.path
    }

    private func load(_ keys: String, app: String = "") async throws -> Result<RelaisConfiguration, ConfigurationError> {
        let session = try file(Base64URL.encode(SecureRandom.bytes(32)))
        let yaml = """
            providers:
              fc:
                preset: franceconnect-v2
                issuer: https://oidc.franceconnect.gouv.fr/api/v2
                client_id: abc
                client_secret: s3cret
            apps:
              app:
                redirect_uris: ["com.example.app:/cb"]
            \(app)
            forward_auth:
              audiences: [app]
            sessions:
              keys:
                s1: {secret_file: \(session)}
            signing:
            \(keys)
            """
        let path = try file(yaml)
        do {
            return .success(try await ConfigurationLoader.load(filePath: path, environment: [:], generateKey: TestKeys.generator()))
        } catch {
            return .failure(error)
        }
    }

    private func problems(_ keys: String, app: String = "") async throws -> [String] {
        switch try await load(keys, app: app) {
        case .success: []
        case .failure(let error): error.problems.map(\.description)
        }
    }

    /// RSA keys from the test pool (`slot`: keys of two slots differ).
    private func keyFile(_ algorithm: JWSAlgorithm, slot: Int = 0) throws -> String {
        let key = algorithm == .rs256 ? try TestKeys.rsa(slot) : try JWK.generate(for: algorithm)
        return try file(try #require(key.privateKeyPEM()))
    }

    @Test func productionNeedsAnRSAKeyBesideTheECKey() async throws {
        let ec = try keyFile(.es256)
        #expect(
            try await problems("  keys:\n    ec1: {file: \(ec)}") == [
                "signing.active_rsa_key: id_tokens are signed with RS256 (OpenID Connect Discovery 1.0 §3): add an RSA key to signing.keys (openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048)"
            ])
        // One RSA key beside the active EC key is the RSA key; the EC key still signs access tokens.
        let both = try await load("  active_key: ec1\n  keys:\n    ec1: {file: \(ec)}\n    rsa1: {file: \(try keyFile(.rs256))}").get()
        #expect(both.keys.activeSigningKey == "ec1" && both.keys.activeRSAKey == "rsa1")
        #expect(both.apps[0].idTokenAlgorithm == .rs256)
        // An RSA active key is the RSA key too.
        let rsaOnly = try await load("  keys:\n    rsa1: {file: \(try keyFile(.rs256))}").get()
        #expect(rsaOnly.keys.activeRSAKey == "rsa1")
    }

    @Test func theRSAKeyMustBeOneRSAKeyOfSigningKeys() async throws {
        let (ec, rsa1, rsa2) = (try keyFile(.es256), try keyFile(.rs256), try keyFile(.rs256, slot: 1))
        let two = "  active_key: ec1\n  keys:\n    ec1: {file: \(ec)}\n    rsa1: {file: \(rsa1)}\n    rsa2: {file: \(rsa2)}"
        #expect(try await problems(two) == ["signing.active_rsa_key: name the RSA key that signs id_tokens among signing.keys (rsa1, rsa2)"])
        #expect(try await load(two + "\n  active_rsa_key: rsa2").get().keys.activeRSAKey == "rsa2")
        #expect(try await problems(two + "\n  active_rsa_key: ec1") == ["signing.active_rsa_key: 'ec1' is not an RSA key of signing.keys (rsa1, rsa2)"])
    }

    @Test func anAppMayAskForES256IdTokensOfAnECActiveKey() async throws {
        let ec = try keyFile(.es256), rsa = try keyFile(.rs256)
        let keys = "  active_key: ec1\n  keys:\n    ec1: {file: \(ec)}\n    rsa1: {file: \(rsa)}"
        let es256 = try await load(keys, app: "    id_token_signed_response_alg: ES256").get()
        #expect(es256.apps[0].idTokenAlgorithm == .es256)
        #expect(
            try await problems(keys, app: "    id_token_signed_response_alg: HS256") == [
                "apps.app.id_token_signed_response_alg: expected RS256 (the default) or ES256; got 'HS256'"
            ])
        let rsaActive = "  active_key: rsa1\n  keys:\n    ec1: {file: \(ec)}\n    rsa1: {file: \(rsa)}"
        #expect(
            try await problems(rsaActive, app: "    id_token_signed_response_alg: ES256") == [
                "apps.app.id_token_signed_response_alg: ES256 needs an EC P-256 signing.active_key; 'rsa1' is RSA"
            ])
    }
}
