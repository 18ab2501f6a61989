import Foundation
import RelaisAttest
import RelaisCrypto
import RelaisJOSE
import RelaisTestSupport
import Testing

@testable import RelaisConfig

/// `apps.<id>.attestation` and the platform settings it needs; the development attester.
@Suite(.tags(.fast)) struct AttestationConfigurationTests {
    private func file(_ contents: String) throws -> String {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("relais-attest-\(UUID().uuidString)")
        try contents.write(to: url, atomically: true, encoding: .utf8)
        return url.path
    }

    private func load(_ apps: String, extra: String = "", development: Bool = true) async throws -> Result<RelaisConfiguration, ConfigurationError> {
        let yaml = """
            providers:
              fc:
                preset: franceconnect-v2
                issuer: https://oidc.franceconnect.gouv.fr/api/v2
                client_id: abc
                client_secret: a-secret
            apps:
            \(apps)
            \(extra)
            """
        let path = try file(yaml)
        do {
            return .success(
                try await ConfigurationLoader.load(filePath: path, environment: development ? ["RELAIS_SERVER_ENVIRONMENT": "development"] : [:], generateKey: TestKeys.generator())
            )
        } catch {
            return .failure(error)
        }
    }

    private func problems(_ apps: String, extra: String = "", development: Bool = true) async throws -> [String] {
        switch try await load(apps, extra: extra, development: development) {
        case .success: []
        case .failure(let error): error.problems.map(\.description)
        }
    }

    @Test func platformsAreReadIntoTheirVerifiers() async throws {
        let signer = try JWK.generate(for: .es256)
        let spki = try #require(signer.publicKeyPEM()).split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
        let digest = String(repeating: "AB:", count: 31) + "AB"
        let configuration = try await load(
            """
              app:
                redirect_uris: ["com.example.app:/cb"]
                attestation: required
                client_attestation_lifetime: 10m
                apple:
                  app_id: ABCDE12345.fr.example.app
                  environment: development
                android:
                  package_name: fr.example.app
                  certificate_digests: ["\(digest)"]
                  device_integrity: strong
                  max_verdict_age: 2m
                  decryption_key: \(Base64.encode(SecureRandom.bytes(32)))
                  verification_key: \(spki)
            """
        ).get()
        let app = try #require(configuration.apps.first)
        #expect(app.attestation == .required && app.clientAttestationLifetime == .seconds(600))
        #expect(app.apple?.verifier.appID == "ABCDE12345.fr.example.app" && app.apple?.verifier.environment == .development)
        #expect(app.apple?.verifier.roots == [AppAttestVerifier.appleRoot], "production apps trust Apple's pinned root only")
        #expect(app.android?.policy.deviceIntegrity == .strong && app.android?.policy.maxAge == .seconds(120))
        #expect(app.android?.verificationKey == spki)
        #expect(configuration.relay.devAttester, "on by default in development")
    }

    @Test func eachMisconfigurationNamesItsKey() async throws {
        let found = try await problems(
            """
              nothing:
                redirect_uris: ["com.example.app:/cb"]
                attestation: required
              badapple:
                redirect_uris: ["com.example.app:/cb"]
                attestation: always
                apple:
                  app_id: fr.example.app
                  environment: staging
              halfandroid:
                redirect_uris: ["com.example.app:/cb"]
                attestation: allowed
                android:
                  package_name: fr.example.app
                  certificate_digests: ["not-a-digest"]
                  decryption_key: \(Base64.encode(SecureRandom.bytes(32)))
              orphan:
                redirect_uris: ["com.example.app:/cb"]
                android:
                  verification_key: AAAA
              lonely:
                redirect_uris: ["com.example.app:/cb"]
                attester:
                  issuer: https://attester.example.fr
            """,
            extra: "attestation:\n  dev_attester: true",
            development: false
        )
        let expected = [
            "attestation.dev_attester: the development attester accepts any device",
            "apps.nothing.attestation: 'required' needs a way to attest",
            "apps.badapple.attestation: expected one of off, allowed, required",
            "apps.badapple.apple.app_id: 'fr.example.app' is not TEAMID.bundle.id",
            "apps.badapple.apple.environment: expected one of production, development",
            "apps.halfandroid.android.certificate_digests: 'not-a-digest' is not a SHA-256 digest",
            "apps.halfandroid.android.decryption_key: classic requests need both",
            "apps.orphan.android.package_name: the Android settings need the package name",
            "apps.lonely.attester: set both issuer and keys_file",
        ]
        for line in expected {
            #expect(found.contains { $0.hasPrefix(line) }, "missing: \(line)\nin \(found.joined(separator: "\n"))")
        }
    }

    @Test func anExternalAttesterNeedsPublicKeys() async throws {
        let key = try JWK.generate(for: .es256, keyID: "a1")
        let publicSet = try file(String(decoding: JSONValue.object(["keys": .array([.object(try #require(key.publicJSON()))])]).serialized(), as: UTF8.self))
        let app = { (path: String) in
            """
              app:
                redirect_uris: ["com.example.app:/cb"]
                attestation: required
                attester:
                  issuer: https://attester.example.fr
                  keys_file: \(path)
            """
        }
        let configuration = try await load(app(publicSet), extra: "attestation:\n  dev_attester: false").get()
        #expect(configuration.apps[0].attester?.issuer == "https://attester.example.fr")
        #expect(configuration.apps[0].attester?.keys.keys.count == 1)
        #expect(!configuration.relay.devAttester)
        let broken = try await problems(app(try file("{}")))
        #expect(broken.contains { $0.hasPrefix("apps.app.attester.keys_file:") && $0.contains("not a JWKS of public keys") })
    }
}
