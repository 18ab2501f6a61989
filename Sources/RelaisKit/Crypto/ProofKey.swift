import Crypto
public import Foundation

/// Where an app instance's P-256 key lives, as reported by ``ProofKey/kind``.
public enum ProofKeyKind: String, Sendable, Codable {
    /// In the Secure Enclave: the private key never leaves the chip.
    case secureEnclave = "secure_enclave"
    /// A software key from swift-crypto, kept in the app's secure storage (the simulator, app
    /// extensions, Linux).
    case software
}

/// The app instance's key: it signs the DPoP proofs and the attestation PoPs (ES256).
///
/// The library uses one key per installation. Adapters are thin: the core builds every JWT.
public protocol ProofKey: Sendable {
    /// Where the key lives.
    var kind: ProofKeyKind { get }
    /// The public key as the 64 bytes x ‖ y.
    var publicKeyRaw: Data { get }
    /// An ES256 signature (r ‖ s, 64 bytes) over `data`.
    func sign(_ data: Data) throws -> Data
    /// What ``ProofKeyStore`` keeps to find the key again (a software key's private bytes, or a
    /// Secure Enclave key's opaque handle).
    var persistentRepresentation: Data { get }
}

extension ProofKey {
    /// The public JWK, members in RFC 7638 order.
    public var publicJWK: String {
        let raw = publicKeyRaw
        return JSONReading.serialize([
            ("crv", .string("P-256")), ("kty", .string("EC")),
            ("x", .string(Base64URL.encode(raw.prefix(32)))), ("y", .string(Base64URL.encode(raw.suffix(32)))),
        ])
    }

    /// The RFC 7638 thumbprint of ``publicJWK`` (base64url SHA-256), the `jkt` Relais binds tokens to.
    public var thumbprint: String { Base64URL.encode(Data(SHA256.hash(data: Data(publicJWK.utf8)))) }
}

/// A P-256 key made by swift-crypto, for platforms (or moments) without a Secure Enclave.
public struct SoftwareProofKey: ProofKey {
    private let key: P256.Signing.PrivateKey

    /// A new random key.
    public init() { key = P256.Signing.PrivateKey() }

    /// The key saved as ``persistentRepresentation``.
    public init(persistentRepresentation: Data) throws { key = try P256.Signing.PrivateKey(rawRepresentation: persistentRepresentation) }

    public var kind: ProofKeyKind { .software }
    public var publicKeyRaw: Data { key.publicKey.rawRepresentation }
    public var persistentRepresentation: Data { key.rawRepresentation }
    public func sign(_ data: Data) throws -> Data { try key.signature(for: data).rawRepresentation }
}

/// Makes and reloads the instance key: the Secure Enclave adapter on Apple devices, software keys elsewhere.
public protocol ProofKeyFactory: Sendable {
    /// A new key; the factory says which kind it made.
    func makeKey() throws -> any ProofKey
    /// The key saved earlier, of the given kind.
    func loadKey(kind: ProofKeyKind, _ representation: Data) throws -> any ProofKey
}

/// Software keys only (Linux, tests, and Apple platforms without an enclave).
public struct SoftwareProofKeyFactory: ProofKeyFactory {
    public init() {}
    public func makeKey() throws -> any ProofKey { SoftwareProofKey() }
    public func loadKey(kind: ProofKeyKind, _ representation: Data) throws -> any ProofKey {
        guard kind == .software else { throw RelaisKitError(.keyLost, "the stored key is a \(kind.rawValue) key, which this device cannot use") }
        return try SoftwareProofKey(persistentRepresentation: representation)
    }
}
