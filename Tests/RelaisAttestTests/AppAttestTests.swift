import Crypto
import Foundation
import RelaisAttest
import RelaisCrypto
import RelaisTestSupport
import Testing
import X509

/// Apple's validation steps, each wrong in turn, on attestations made with a test CA; and Apple's
/// own published sample attestation against the pinned root.
@Suite(.tags(.fast)) struct AppAttestTests {
    let factory: AppAttestFactory
    let verifier: AppAttestVerifier
    let clientDataHash = Array(Crypto.SHA256.hash(data: Array(#"{"challenge":"c1","jkt":"k1"}"#.utf8)))
    let checkTime = AppAttestFactory.issued + 3600

    init() throws {
        factory = try AppAttestFactory()
        verifier = AppAttestVerifier(appID: AppAttestFactory.appID, environment: .development, roots: [factory.root])
    }

    private func refusal(
        _ spoil: (inout AppAttestFactory.Attestation) -> Void, keyID: [UInt8]? = nil, verifier: AppAttestVerifier? = nil, at time: Date? = nil
    ) async throws -> AttestationError.Code? {
        let object = try factory.attestation(clientDataHash: clientDataHash, spoil)
        do {
            _ = try await (verifier ?? self.verifier).verifyAttestation(object, keyID: keyID ?? factory.keyID, clientDataHash: clientDataHash, at: time ?? checkTime)
            return nil
        } catch {
            return error.code
        }
    }

    @Test func aGenuineAttestationGivesTheCredentialKey() async throws {
        let object = try factory.attestation(clientDataHash: clientDataHash)
        let key = try await verifier.verifyAttestation(object, keyID: factory.keyID, clientDataHash: clientDataHash, at: checkTime)
        #expect(key.publicKey == Array(factory.credentialKey.publicKey.x963Representation))
        #expect(key.counter == 0)
        #expect(key.receipt == [1, 2, 3])
        #expect(key.publicKeyPEM.hasPrefix("-----BEGIN PUBLIC KEY-----"))
    }

    @Test func eachStepRefusesItsOwnDefect() async throws {
        #expect(try await refusal({ $0.format = "packed" }) == .appleMalformed)
        #expect(
            try await refusal({ _ in }, verifier: AppAttestVerifier(appID: AppAttestFactory.appID, environment: .development, roots: [try AppAttestFactory().root])) == .appleChain)
        #expect(try await refusal({ _ in }, at: AppAttestFactory.issued + 86400 * 4) == .appleChain, "the credential certificate has expired")
        #expect(try await refusal({ _ in }, at: AppAttestFactory.issued - 3600) == .appleChain, "not yet valid")
        #expect(try await refusal({ $0.nonceOverride = [UInt8](repeating: 7, count: 32) }) == .appleNonce)
        #expect(try await refusal({ $0.withNonceExtension = false }) == .appleNonce)
        #expect(try await refusal({ _ in }, keyID: [UInt8](repeating: 1, count: 32)) == .appleKeyID)
        #expect(try await refusal({ $0.appID = "ABCDE12345.fr.example.other" }) == .appleAppID)
        #expect(try await refusal({ $0.counter = 1 }) == .appleCounter)
        #expect(try await refusal({ $0.aaguid = Array("appattest".utf8) + [UInt8](repeating: 0, count: 7) }) == .appleEnvironment)
        #expect(try await refusal({ $0.credentialID = [UInt8](repeating: 2, count: 32) }) == .appleCredentialID)
    }

    @Test func anotherClientDataIsANonceMismatch() async throws {
        let object = try factory.attestation(clientDataHash: clientDataHash)
        await #expect(throws: AttestationError.self) {
            _ = try await verifier.verifyAttestation(object, keyID: factory.keyID, clientDataHash: [UInt8](repeating: 0, count: 32), at: checkTime)
        }
    }

    @Test func productionRefusesADevelopmentKey() async throws {
        let production = AppAttestVerifier(appID: AppAttestFactory.appID, environment: .production, roots: [factory.root])
        #expect(try await refusal({ _ in }, verifier: production) == .appleEnvironment)
        #expect(try await refusal({ $0.aaguid = Array("appattest".utf8) + [UInt8](repeating: 0, count: 7) }, verifier: production) == nil)
    }

    @Test func truncatedOrForeignObjectsAreMalformed() async throws {
        let object = try factory.attestation(clientDataHash: clientDataHash)
        for bad in [[], Array(object.prefix(object.count / 2)), object + [0], CBORWriter.encode(CBORWriter.map([("fmt", .text("apple-appattest"))]))] {
            do {
                _ = try await verifier.verifyAttestation(bad, keyID: factory.keyID, clientDataHash: clientDataHash, at: checkTime)
                Issue.record("accepted \(bad.count) bytes")
            } catch {
                #expect(error.code == .appleMalformed)
            }
        }
    }

    // MARK: Assertions

    @Test func assertionsCountUpAndAreSignedByTheAttestedKey() throws {
        let key = Array(factory.credentialKey.publicKey.x963Representation)
        let clientData = Array(#"{"challenge":"c2","jkt":"k1"}"#.utf8)
        let first = try factory.assertion(clientData: clientData, counter: 1)
        #expect(try verifier.verifyAssertion(first, clientData: clientData, publicKey: key, previousCounter: 0) == 1)

        func code(_ body: () throws -> UInt32) -> AttestationError.Code? {
            do { _ = try body(); return nil } catch let error as AttestationError { return error.code } catch { return nil }
        }
        #expect(code { try verifier.verifyAssertion(first, clientData: clientData, publicKey: key, previousCounter: 1) } == .appleAssertionCounter, "replayed")
        #expect(code { try verifier.verifyAssertion(first, clientData: Array("other".utf8), publicKey: key, previousCounter: 0) } == .appleAssertionSignature)
        let stranger = try factory.assertion(clientData: clientData, counter: 2, key: P256.Signing.PrivateKey())
        #expect(code { try verifier.verifyAssertion(stranger, clientData: clientData, publicKey: key, previousCounter: 1) } == .appleAssertionSignature)
        let otherApp = try factory.assertion(clientData: clientData, counter: 2, appID: "ABCDE12345.fr.example.other")
        #expect(code { try verifier.verifyAssertion(otherApp, clientData: clientData, publicKey: key, previousCounter: 1) } == .appleAssertionAppID)
        #expect(code { try verifier.verifyAssertion([0xa0], clientData: clientData, publicKey: key, previousCounter: 1) } == .appleAssertionMalformed)
        #expect(code { try verifier.verifyAssertion(Array(first.prefix(20)), clientData: clientData, publicKey: key, previousCounter: 1) } == .appleAssertionMalformed)
    }

    // MARK: Apple's root and sample

    @Test func thePinnedRootIsApplesPublishedOne() throws {
        let der = try AppAttestFactory.der(AppAttestVerifier.appleRoot)
        #expect(Hex.encode(RelaisCrypto.SHA256.hash(der)) == AppAttestVerifier.appleRootFingerprint)
        #expect(AppAttestVerifier.appleRoot.subject.description.contains("Apple App Attestation Root CA"))
    }

    static func appleSample() throws -> [UInt8] {
        let url = try #require(Bundle.module.url(forResource: "Fixtures/apple-sample-attestation", withExtension: "b64"))
        return try #require(Base64.decode(String(contentsOf: url, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)))
    }

    /// Apple's attestation object validation guide: team 0352187391, bundle
    /// com.apple.example_app_attest, clientDataHash the bytes of "test_server_challenge"; its
    /// credential certificate was valid from 2024-04-17 to 2024-04-20.
    @Test func applesSampleVerifiesAgainstThePinnedRootWhileItWasValid() async throws {
        let sample = try Self.appleSample()
        let keyID = try #require(Base64.decode("bSrEhF8TIzIvWSPwvZ0i2+UOBre4ASH84rK15m6emNY="))
        let apple = AppAttestVerifier(appID: "0352187391.com.apple.example_app_attest", environment: .production)
        let inWindow = try Date("2024-04-18T00:00:00Z", strategy: .iso8601)
        let key = try await apple.verifyAttestation(sample, keyID: keyID, clientDataHash: Array("test_server_challenge".utf8), at: inWindow)
        #expect(RelaisCrypto.SHA256.hash(key.publicKey) == keyID)
        #expect(!key.receipt.isEmpty)

        func code(_ verifier: AppAttestVerifier, at time: Date, hash: [UInt8] = Array("test_server_challenge".utf8)) async -> AttestationError.Code? {
            do { _ = try await verifier.verifyAttestation(sample, keyID: keyID, clientDataHash: hash, at: time); return nil } catch { return error.code }
        }
        #expect(await code(apple, at: try Date("2026-01-01T00:00:00Z", strategy: .iso8601)) == .appleChain, "expired since 2024-04-20")
        #expect(await code(AppAttestVerifier(appID: apple.appID, environment: .development), at: inWindow) == .appleEnvironment)
        #expect(await code(AppAttestVerifier(appID: "0352187391.com.apple.other", environment: .production), at: inWindow) == .appleAppID)
        #expect(await code(apple, at: inWindow, hash: Array("another_challenge".utf8)) == .appleNonce)
        #expect(await code(AppAttestVerifier(appID: apple.appID, environment: .production, roots: [factory.root]), at: inWindow) == .appleChain)
    }
}
