public import Foundation

/// How the app instance proves it is the genuine app on a genuine device (Relais' client attester).
public enum AttestationMode: Sendable {
    /// Relais' development attester (`POST /attest/dev`): only where `attestation.dev_attester` is
    /// on (development), never in production.
    case development
    /// Apple App Attest through an ``AppAttestService`` (``DeviceCheckAppAttestService`` on iOS).
    case appAttest(any AppAttestService)
}

/// The three calls of Apple's `DCAppAttestService` the library needs. The adapter maps
/// `DCError.invalidKey` to ``RelaisKitErrorCode/appAttestInvalidKey``; every decision (when to
/// attest, when to assert, when to make a new key) is in the core.
public protocol AppAttestService: Sendable {
    var isSupported: Bool { get }
    func generateKey() async throws -> String
    func attestKey(_ keyID: String, clientDataHash: Data) async throws -> Data
    func generateAssertion(_ keyID: String, clientDataHash: Data) async throws -> Data
}

extension RelaisKitErrorCode {
    /// App Attest no longer knows the key (a reinstall, a restored backup): the library makes a new key once.
    public static let appAttestInvalidKey = Self("app_attest_invalid_key")
}
