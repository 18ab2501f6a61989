import Foundation
import RelaisJOSE
import RelaisTestSupport
import Testing

extension DevProviderProcessTests {
    /// The provider checked by an independent client: Python `requests` drives the sign-in and `joserfc`
    /// verifies the discovery document, the token response, the id_token and the userinfo JWT.
    @Suite struct DevProviderCrossCheckTests {
        static let script = RelaisProcess.packageRoot.appendingPathComponent("scripts/dev-provider-check.py").path

        @Test(arguments: ["ES256", "RS256"])
        func requestsAndJoserfcAcceptTheProvider(algorithm: String) async throws {
            let clients = """
                  py:
                    secret: python-client-secret-0123456789-abcdef
                    redirect_uris: [http://127.0.0.1:9/py-callback]
                    id_token_signed_response_alg: \(algorithm)
                """
            try await check(try await RelaisProcess.devProvider(clients: clients), extraArguments: [])
        }

        @Test(arguments: [("RSA-OAEP-256", JWSAlgorithm.rs256), ("ECDH-ES", .es256)])
        func joserfcDecryptsFranceConnectPlusTokens(encryption: String, keyType: JWSAlgorithm) async throws {
            let key = try JWK.generate(for: keyType, keyID: "py-enc", use: "enc", pinAlgorithm: false)
            let clients = """
                  py:
                    secret: python-client-secret-0123456789-abcdef
                    redirect_uris: [http://127.0.0.1:9/py-callback]
                    jwks: '\(String(decoding: JWKSet(keys: [key]).publicJSON(), as: UTF8.self))'
                    encryption_alg: \(encryption)
                """
            let keyFile = FileManager.default.temporaryDirectory.appendingPathComponent("relais-py-key-\(UUID().uuidString).pem").path
            try #require(key.privateKeyPEM()).write(toFile: keyFile, atomically: true, encoding: .utf8)
            try await check(try await RelaisProcess.devProvider(mode: "fcplus", clients: clients), extraArguments: [keyFile, keyType == .rs256 ? "RSA" : "EC"])
        }

        private func check(_ provider: RelaisProcess, extraArguments: [String]) async throws {
            defer { provider.stop() }
            let output = FileManager.default.temporaryDirectory.appendingPathComponent("relais-py-\(UUID().uuidString)").path
            let process = try ChildProcess.spawn(
                "/usr/bin/env",
                ["python3", Self.script, provider.baseURL + "/api/v2", "py", "python-client-secret-0123456789-abcdef", "http://127.0.0.1:9/py-callback"] + extraArguments,
                standardOutput: output,
                standardError: output
            )
            let status = await process.exitStatus(within: .seconds(60))
            let report = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
            #expect(status == 0, "\(report)")
            #expect(!report.contains("FAIL"))
            #expect(report.components(separatedBy: "\nok ").count >= 24, "\(report)")
        }
    }
}
