#if canImport(CryptoKit) && canImport(Security) && !os(Linux)
public import Foundation
import CryptoKit

/// A P-256 key in the Secure Enclave (CryptoKit); its `dataRepresentation` is an opaque handle
/// that only this device's enclave can use.
public struct SecureEnclaveProofKey: ProofKey {
    private let key: SecureEnclave.P256.Signing.PrivateKey

    public init(_ key: SecureEnclave.P256.Signing.PrivateKey) { self.key = key }

    public var kind: ProofKeyKind { .secureEnclave }
    public var publicKeyRaw: Data { key.publicKey.rawRepresentation }
    public var persistentRepresentation: Data { key.dataRepresentation }
    public func sign(_ data: Data) throws -> Data { try key.signature(for: data).rawRepresentation }
}

/// Secure Enclave keys where the enclave is available, software keys otherwise (simulator, some
/// extensions); ``ProofKey/kind`` reports which one was made.
public struct SecureEnclaveProofKeyFactory: ProofKeyFactory {
    public init() {}

    public func makeKey() throws -> any ProofKey {
        guard SecureEnclave.isAvailable else { return SoftwareProofKey() }
        return SecureEnclaveProofKey(try SecureEnclave.P256.Signing.PrivateKey())
    }

    public func loadKey(kind: ProofKeyKind, _ representation: Data) throws -> any ProofKey {
        switch kind {
        case .software: return try SoftwareProofKey(persistentRepresentation: representation)
        case .secureEnclave:
            do { return SecureEnclaveProofKey(try SecureEnclave.P256.Signing.PrivateKey(dataRepresentation: representation)) } catch {
                throw RelaisKitError(.keyLost, "the Secure Enclave no longer has the instance key")
            }
        }
    }
}
#endif
