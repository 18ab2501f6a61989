import ArgumentParser
import Foundation
import RelaisAttest
import RelaisClock
import RelaisConfig
import RelaisCrypto
import RelaisHTTPClient
import RelaisJOSE

/// `relais attest`: check an app's platform proof by hand, the way Relais checks it, when an app
/// team asks why its attestation is refused.
struct AttestCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "attest",
        abstract: "Verify an Apple App Attest attestation or assertion, or a Google Play Integrity token, as Relais does.",
        discussion: "Exit 0: verified (the result on standard output). Exit 1: refused, the failed check's code on standard error. Exit 2: unusable arguments.",
        subcommands: [Apple.self, AppleAssertion.self, Android.self]
    )

    struct Apple: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Verify a base64 App Attest attestation object; print the credential public key (PEM)."
        )

        @Option(help: "TEAMID.bundle.id of the app.")
        var appID: String

        @Option(help: "The key id the app got from generateKey, base64.")
        var keyID: String

        @Option(help: "The clientDataHash the app passed to attestKey, in hex.")
        var clientDataHex: String

        @Flag(help: "The app uses the development App Attest environment (aaguid appattestdevelop).")
        var development = false

        @Option(help: "Check the certificate chain at this time (ISO 8601, e.g. 2024-06-01T00:00:00Z) instead of now.")
        var at: String?

        @Argument(help: "File holding the base64 attestation object, or - for standard input.")
        var file: String

        func run() async throws {
            guard let keyID = Base64.decode(keyID) ?? Base64URL.decode(keyID), keyID.count == 32 else { throw usage("--key-id is not a base64 32-byte key id") }
            guard let hash = hexBytes(clientDataHex) else { throw usage("--client-data-hex is not hex") }
            let object = try readBase64(file)
            let time = try checkTime(at)
            let verifier = AppAttestVerifier(appID: appID, environment: development ? .development : .production)
            do {
                let key = try await verifier.verifyAttestation(object, keyID: keyID, clientDataHash: hash, at: time)
                print(key.publicKeyPEM, terminator: "")
            } catch {
                printError("refused: \(error)")
                throw ExitCode(1)
            }
        }
    }

    struct Android: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Verify a Play Integrity token (classic requests with the Play Console keys, or standard ones through Google); print the verdict."
        )

        @Option(help: "The Android package name.")
        var package: String

        @Option(name: .customLong("certificate-digest"), help: "A SHA-256 digest of the app signing certificate (repeat for several).")
        var certificateDigests: [String] = []

        @Option(help: "File holding the base64 decryption key from the Play Console (classic requests).")
        var decryptionKeyFile: String?

        @Option(help: "The base64 verification key from the Play Console (classic requests).")
        var verificationKey: String?

        @Option(help: "Google service account JSON key file (standard requests, decoded by Google).")
        var serviceAccountFile: String?

        @Option(help: "The nonce or requestHash the verdict must echo.")
        var expectedHash: String?

        @Option(help: "With --thumbprint: compute the expected hash as Relais does (base64url SHA-256 of challenge ‖ thumbprint).")
        var challenge: String?

        @Option(help: "The RFC 7638 thumbprint of the app-instance key.")
        var thumbprint: String?

        @Option(help: "basic, device or strong.")
        var deviceIntegrity: String = "device"

        @Option(help: "Check the verdict's age at this time (ISO 8601) instead of now.")
        var at: String?

        @Argument(help: "File holding the integrity token, or - for standard input.")
        var file: String

        func run() async throws {
            guard let level = PlayIntegrityPolicy.DeviceLevel(rawValue: deviceIntegrity) else { throw usage("--device-integrity must be basic, device or strong") }
            guard !certificateDigests.isEmpty else { throw usage("give at least one --certificate-digest") }
            let expected: String
            if let expectedHash {
                expected = expectedHash
            } else if let challenge, let thumbprint {
                expected = PlayIntegrityVerifier.requestHash(challenge: challenge, thumbprint: thumbprint)
            } else {
                throw usage("give --expected-hash, or --challenge and --thumbprint")
            }
            let token = try CommandInput.compactFile(file)
            let time = try checkTime(at)
            var policy = PlayIntegrityPolicy(packageName: package, certificateDigests: certificateDigests)
            policy.deviceIntegrity = level
            let http = HTTPClient()
            defer { Task { try? await http.shutdown() } }
            let decoder: any PlayIntegrityDecoder
            do {
                if let decryptionKeyFile, let verificationKey {
                    decoder = try PlayIntegrityLocalDecoder(decryptionKey: try CommandInput.compactFile(decryptionKeyFile), verificationKey: verificationKey)
                } else if let serviceAccountFile {
                    decoder = try PlayIntegrityGoogleDecoder(serviceAccount: Array(try CommandInput.file(serviceAccountFile).utf8), http: http, now: { time.timeIntervalSince1970 })
                } else {
                    throw usage("give --decryption-key-file and --verification-key, or --service-account-file")
                }
            } catch let error as AttestationError {
                throw usage(error.reason)
            }
            do {
                let verdict = try await PlayIntegrityVerifier(policy: policy, decoder: decoder).verify(token, expectedHash: expected, now: time.timeIntervalSince1970)
                let output: JSONValue = .object([
                    "verified": .bool(true), "device_integrity": .array(verdict.deviceVerdicts.map { .string($0) }),
                    "version_code": verdict.versionCode.map { .string($0) } ?? .null, "licensing": verdict.licensing.map { .string($0) } ?? .null,
                ])
                print(String(decoding: output.serialized(pretty: true), as: UTF8.self))
            } catch {
                printError("refused: \(error)")
                throw ExitCode(1)
            }
        }
    }
}

func usage(_ message: String) -> ExitCode { CommandInput.usage("relais attest: \(message)") }

private func checkTime(_ text: String?) throws -> Date {
    guard let text else { return Date(timeIntervalSince1970: SystemClock().now) }
    guard let date = try? Date(text, strategy: .iso8601) else { throw usage("--at '\(text)' is not an ISO 8601 time such as 2024-06-01T00:00:00Z") }
    return date
}

func readBase64(_ path: String) throws -> [UInt8] {
    let text = try CommandInput.compactFile(path)
    guard let bytes = Base64.decode(text) ?? Base64URL.decode(text.filter { $0 != "=" }) else { throw usage("\(path) does not hold base64") }
    return bytes
}

private func hexBytes(_ text: String) -> [UInt8]? {
    let digits = Array(text.utf8)
    guard digits.count % 2 == 0 else { return nil }
    var bytes: [UInt8] = []
    bytes.reserveCapacity(digits.count / 2)
    for index in stride(from: 0, to: digits.count, by: 2) {
        guard let high = Hex.value(of: digits[index]), let low = Hex.value(of: digits[index + 1]) else { return nil }
        bytes.append(high << 4 | low)
    }
    return bytes
}
