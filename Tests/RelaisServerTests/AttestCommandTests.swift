import Crypto
import Foundation
import RelaisAttest
import RelaisCrypto
import RelaisJOSE
import RelaisTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `relais attest apple` on Apple's published sample, and `relais attest android` on verdicts made
/// with test keys, run as an operator would.
@Suite struct AttestCommandTests {
    static let sample = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("RelaisAttestTests/Fixtures/apple-sample-attestation.b64").path
    static let appleArguments = [
        "attest", "apple", "--app-id", "0352187391.com.apple.example_app_attest", "--key-id", "bSrEhF8TIzIvWSPwvZ0i2+UOBre4ASH84rK15m6emNY=",
        "--client-data-hex", Hex.encode(Array("test_server_challenge".utf8)),
    ]

    private func path(_ name: String) -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("relais-attest-\(UUID().uuidString)-\(name)").path
    }

    private func run(_ arguments: [String]) async throws -> (status: Int32?, stdout: String, stderr: String) {
        let out = path("out"), err = path("err")
        let process = try ChildProcess.spawn(CommandLineTests.binary, arguments, standardOutput: out, standardError: err)
        let status = await process.exitStatus(within: .seconds(30))
        if status == nil { process.terminate(with: SIGKILL) }
        return (status, (try? String(contentsOfFile: out, encoding: .utf8)) ?? "", (try? String(contentsOfFile: err, encoding: .utf8)) ?? "")
    }

    @Test func applesSampleVerifiesAtATimeItsChainWasValid() async throws {
        let result = try await run(Self.appleArguments + ["--at", "2024-04-18T00:00:00Z", Self.sample])
        #expect(result.status == 0, "\(result.stderr)")
        let key = try JWK(pem: result.stdout)
        #expect(key.curve == .p256 && !key.isPrivate)
    }

    @Test func eachRefusalNamesTheFailedStep() async throws {
        let expired = try await run(Self.appleArguments + [Self.sample])
        #expect(expired.status == 1)
        #expect(expired.stderr.contains("apple_attestation_chain"))
        let development = try await run(Self.appleArguments + ["--development", "--at", "2024-04-18T00:00:00Z", Self.sample])
        #expect(development.status == 1 && development.stderr.contains("apple_attestation_environment"))
        let otherHash = try await run(Array(Self.appleArguments.dropLast()) + ["00", "--at", "2024-04-18T00:00:00Z", Self.sample])
        #expect(otherHash.status == 1 && otherHash.stderr.contains("apple_attestation_nonce"))
    }

    @Test func unusableArgumentsExitTwo() async throws {
        #expect(try await run(Self.appleArguments + ["--at", "yesterday", Self.sample]).status == 2)
        #expect(try await run(Array(Self.appleArguments.dropLast()) + ["zz", Self.sample]).status == 2)
        #expect(try await run(Self.appleArguments + ["/nonexistent/file"]).status == 2)
    }

    /// `relais attest apple-assertion` on assertions made with a test key: the counter to store on
    /// success, the failed step otherwise (issue 33, finding 15).
    @Test func appleAssertionsPrintTheNextCounterOrTheFailedStep() async throws {
        let factory = try AppAttestFactory()
        let clientData = Array(#"{"challenge":"c1","jkt":"t1"}"#.utf8)
        let keyFile = path("key.pem"), dataFile = path("client-data")
        try factory.credentialKey.publicKey.pemRepresentation.write(toFile: keyFile, atomically: true, encoding: .utf8)
        try Data(clientData).write(to: URL(fileURLWithPath: dataFile))
        func verify(
            _ assertion: [UInt8], counter: UInt32, appID: String = AppAttestFactory.appID, key: String? = nil
        ) async throws -> (status: Int32?, stdout: String, stderr: String) {
            let assertionFile = path("assertion")
            try Base64.encode(assertion).write(toFile: assertionFile, atomically: true, encoding: .utf8)
            return try await run([
                "attest", "apple-assertion", "--app-id", appID, "--public-key", key ?? keyFile, "--client-data-file", dataFile, "--counter", String(counter), assertionFile,
            ])
        }
        let seventh = try factory.assertion(clientData: clientData, counter: 7)
        let genuine = try await verify(seventh, counter: 6)
        #expect(genuine.status == 0 && genuine.stdout == "7\n", "\(genuine.stderr)")
        #expect(try await verify(seventh, counter: 0).stdout == "7\n")

        let replayed = try await verify(seventh, counter: 7)
        #expect(replayed.status == 1 && replayed.stderr.contains("apple_assertion_counter"), "\(replayed.stderr)")
        let otherApp = try await verify(seventh, counter: 0, appID: "ABCDE12345.fr.example.other")
        #expect(otherApp.status == 1 && otherApp.stderr.contains("apple_assertion_app_id"), "\(otherApp.stderr)")
        let otherData = try await verify(try factory.assertion(clientData: Array("other".utf8), counter: 8), counter: 7)
        #expect(otherData.status == 1 && otherData.stderr.contains("apple_assertion_signature"), "\(otherData.stderr)")
        let otherKey = try await verify(try factory.assertion(clientData: clientData, counter: 8, key: P256.Signing.PrivateKey()), counter: 7)
        #expect(otherKey.status == 1 && otherKey.stderr.contains("apple_assertion_signature"), "\(otherKey.stderr)")
        let malformed = try await verify(Array("not cbor".utf8), counter: 0)
        #expect(malformed.status == 1 && malformed.stderr.contains("apple_assertion_malformed"), "\(malformed.stderr)")

        // Unusable arguments: a file that is not a P-256 PEM, missing client data.
        let notAKey = path("not-a-key")
        try "hello".write(toFile: notAKey, atomically: true, encoding: .utf8)
        #expect(try await verify(seventh, counter: 0, key: notAKey).status == 2)
        #expect(
            try await run(["attest", "apple-assertion", "--app-id", AppAttestFactory.appID, "--public-key", keyFile, "--client-data-file", "/nonexistent", keyFile]).status == 2)
    }

    @Test func androidVerdictsWithTheConsoleKeys() async throws {
        let play = try PlayIntegrityFactory()
        let now = Date().timeIntervalSince1970
        let hash = PlayIntegrityVerifier.requestHash(challenge: "c1", thumbprint: "t1")
        let keyFile = path("key")
        try play.decryptionKey.write(toFile: keyFile, atomically: true, encoding: .utf8)
        func verify(_ payload: [String: JSONValue]) async throws -> (status: Int32?, stdout: String, stderr: String) {
            let tokenFile = path("token")
            try play.token(payload).write(toFile: tokenFile, atomically: true, encoding: .utf8)
            return try await run([
                "attest", "android", "--package", PlayIntegrityFactory.package, "--certificate-digest", PlayIntegrityFactory.digest,
                "--decryption-key-file", keyFile, "--verification-key", play.verificationKey, "--challenge", "c1", "--thumbprint", "t1", tokenFile,
            ])
        }
        let genuine = try await verify(PlayIntegrityFactory.payload(hash: hash, now: now))
        #expect(genuine.status == 0, "\(genuine.stderr)")
        #expect(genuine.stdout.contains("MEETS_DEVICE_INTEGRITY"))
        let wrong = try await verify(PlayIntegrityFactory.payload(hash: hash, now: now) { $0["appIntegrity"]?.set("packageName", .string("fr.other")) })
        #expect(wrong.status == 1 && wrong.stderr.contains("play_integrity_package"))
        let stale = try await verify(PlayIntegrityFactory.payload(hash: hash, now: now - 3600))
        #expect(stale.status == 1 && stale.stderr.contains("play_integrity_stale"))
    }
}
