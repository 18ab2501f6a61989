import ArgumentParser
import Foundation
import RelaisAttest
import RelaisCrypto
import RelaisJOSE

extension AttestCommand {
    /// `relais attest apple-assertion`: a support case asks whether a device's assertion is
    /// genuine. The same verifier as `POST /attest/apple/assertion`, with the key the operator
    /// holds (what `relais attest apple` printed) and the counter last stored for it.
    struct AppleAssertion: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "apple-assertion",
            abstract: "Verify a base64 App Attest assertion by an attested key; print the new counter.",
            discussion:
                "Exit 0: verified, the counter to store in place of --counter on standard output. Exit 1: refused, the failed step's code on standard error. Exit 2: unusable arguments."
        )

        @Option(help: "TEAMID.bundle.id of the app.")
        var appID: String

        @Option(help: "PEM file of the attested key's public key (what `relais attest apple` prints).")
        var publicKey: String

        @Option(help: "File holding the client data the app passed to generateAssertion (its bytes as they are).")
        var clientDataFile: String

        @Option(help: "The counter stored for this key (its last assertion's, 0 after the attestation).")
        var counter: UInt32 = 0

        @Argument(help: "File holding the base64 assertion, or - for standard input.")
        var file: String

        func run() async throws {
            let point = try Self.publicPoint(CommandInput.file(publicKey))
            guard let clientData = FileManager.default.contents(atPath: clientDataFile) else { throw usage("cannot read \(clientDataFile)") }
            let assertion = try readBase64(file)
            let verifier = AppAttestVerifier(appID: appID, environment: .production)
            do {
                let next = try verifier.verifyAssertion(assertion, clientData: Array(clientData), publicKey: point, previousCounter: counter)
                print(next)
            } catch {
                printError("refused: \(error)")
                throw ExitCode(1)
            }
        }

        /// The P-256 public key of a PEM (public or private) as the uncompressed point App Attest
        /// stores: 0x04 ‖ x ‖ y.
        static func publicPoint(_ pem: String) throws -> [UInt8] {
            guard let key = try? JWK(pem: pem), key.curve == .p256, let json = key.publicJSON(),
                let x = json["x"]?.stringValue.flatMap(Base64URL.decode), let y = json["y"]?.stringValue.flatMap(Base64URL.decode), x.count == 32, y.count == 32
            else { throw usage("--public-key is not the PEM of a P-256 key") }
            return [0x04] + x + y
        }
    }
}
