#if canImport(CryptoKit) && canImport(Security) && !os(Linux)
public import Foundation
import CryptoKit

/// A P-256 key in the Secure Enclave (CryptoKit). What is kept is its `dataRepresentation`, an
/// opaque handle that only this device's enclave can use; the key is rebuilt from it per signature.
public struct SecureEnclaveProofKey: ProofKey {
    public let persistentRepresentation: Data
    public let publicKeyRaw: Data

    public init(persistentRepresentation: Data) throws {
        let key = try SecureEnclave.P256.Signing.PrivateKey(dataRepresentation: persistentRepresentation)
        self.persistentRepresentation = persistentRepresentation
        publicKeyRaw = key.publicKey.rawRepresentation
    }

    public var kind: ProofKeyKind { .secureEnclave }

    public func sign(_ data: Data) throws -> Data {
        try SecureEnclave.P256.Signing.PrivateKey(dataRepresentation: persistentRepresentation).signature(for: data).rawRepresentation
    }
}

/// Secure Enclave keys where the enclave is available, software keys otherwise (simulator, some
/// extensions); ``ProofKey/kind`` reports which one was made.
public struct SecureEnclaveProofKeyFactory: ProofKeyFactory {
    public init() {}

    public func makeKey() throws -> any ProofKey {
        guard SecureEnclave.isAvailable else { return SoftwareProofKey() }
        return try SecureEnclaveProofKey(persistentRepresentation: try SecureEnclave.P256.Signing.PrivateKey().dataRepresentation)
    }

    public func loadKey(kind: ProofKeyKind, _ representation: Data) throws -> any ProofKey {
        switch kind {
        case .software: return try SoftwareProofKey(persistentRepresentation: representation)
        case .secureEnclave:
            do { return try SecureEnclaveProofKey(persistentRepresentation: representation) } catch {
                throw RelaisKitError(.keyLost, "the Secure Enclave no longer has the instance key")
            }
        }
    }
}
#endif
